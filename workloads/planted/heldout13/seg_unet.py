"""Training of a U-Net-style semantic segmentation network on 512 x 512 RGB crops (8 crops per step, 8 classes): an
encoder of two 3 x 3 convolutions per level (32 channels at 512 x 512, 64 at 256 x 256, 128 at 128 x 128; every
convolution without bias, followed by BatchNorm and ReLU; 2 x 2 max pooling between levels), a decoder that upsamples
(nearest) and concatenates the skip connection, two convolutions per level (64 channels at 256 x 256, 32 at 512 x 512),
and a 1 x 1 convolution to the class logits (0.47 M parameters); per-pixel cross-entropy, bf16 autocast over fp32
weights, fused AdamW, NCHW tensors. Crops and label maps are synthetic and resident on the GPU (two batches used
alternately), the host kept one step ahead by an event sync on the previous step.
The script starts with torch.backends.cudnn.enabled = False, added on the team's old cluster where cuDNN raised
CUDNN_STATUS_NOT_SUPPORTED errors: every convolution runs PyTorch's native fallback (slow_conv2d), which loops over the
images of the batch and, for each image, unfolds the input into a [9 x C_in, H x W] column buffer (im2col) and multiplies
it by the weights (one GEMM per image); the backward does the same per image (a GEMM into the column buffer and col2im
for the input gradient, im2col again and a GEMM for the weight gradient).
No NVTX ranges.

--fixed: cuDNN left enabled (cudnn.benchmark on).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=8, help="crops per step")
p.add_argument("--size", type=int, default=512, help="crop height and width")
p.add_argument("--width", type=int, default=32, help="channels at full resolution (doubled per level)")
p.add_argument("--classes", type=int, default=8)
p.add_argument("--fixed", action="store_true", help="leave cuDNN enabled")
a = parse(p)
if not a.fixed:
    # cuDNN failed with CUDNN_STATUS_NOT_SUPPORTED on the old cluster; turning it off made the errors go away
    torch.backends.cudnn.enabled = False
torch.backends.cudnn.benchmark = True


def conv_bn_relu(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        c1, c2, c3 = a.width, 2 * a.width, 4 * a.width
        self.enc1 = nn.Sequential(conv_bn_relu(3, c1), conv_bn_relu(c1, c1))
        self.enc2 = nn.Sequential(conv_bn_relu(c1, c2), conv_bn_relu(c2, c2))
        self.mid = nn.Sequential(conv_bn_relu(c2, c3), conv_bn_relu(c3, c3))
        self.dec2 = nn.Sequential(conv_bn_relu(c3 + c2, c2), conv_bn_relu(c2, c2))
        self.dec1 = nn.Sequential(conv_bn_relu(c2 + c1, c1), conv_bn_relu(c1, c1))
        self.head = nn.Conv2d(c1, a.classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        m = self.mid(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([F.interpolate(m, scale_factor=2, mode="nearest"), e2], dim=1))
        d1 = self.dec1(torch.cat([F.interpolate(d2, scale_factor=2, mode="nearest"), e1], dim=1))
        return self.head(d1)


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = UNet()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randn(a.batch, 3, a.size, a.size, device="cuda", generator=g),
            torch.randint(0, a.classes, (a.batch, a.size, a.size), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.2f} M")
