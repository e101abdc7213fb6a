"""2-rank data-parallel training (torchrun --nproc_per_node=2) of a ResNet-50 image classifier (bottleneck blocks
[3, 4, 6, 3], widths 64-512 expanded 4x, stride on the 3 x 3 convolution, 53 BatchNorm layers, 1000 classes, 25.6 M
parameters) on 224 x 224 images, 128 per GPU (256 per step), channels_last, bf16 autocast over fp32 weights, SGD with
Nesterov momentum 0.9 and weight decay (foreach), cudnn.benchmark on, DistributedDataParallel with its defaults
(25 MB buckets, buffers broadcast from rank 0 every forward); synthetic images and labels resident on the GPU (two
batches per rank used alternately), the host kept one step ahead by an event sync on the previous step.
Every BatchNorm2d was converted with nn.SyncBatchNorm.convert_sync_batchnorm(model) before wrapping in DDP (a line
copied from a detection recipe): each of the 53 BN forwards all-gathers the ranks' per-channel mean / invstd / count and
filters them with boolean-mask indexing (PyTorch's SyncBatchNorm: three device-to-host synchronizations per layer), and
each BN backward all-reduces two per-channel sums before the input gradient.
NVTX: step_N > forward / backward / optimizer.

--fixed: plain BatchNorm2d (each rank normalizes over its own 128 images).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=128, help="images per GPU and step")
p.add_argument("--image", type=int, default=224)
p.add_argument("--classes", type=int, default=1000)
p.add_argument("--fixed", action="store_true", help="plain BatchNorm2d instead of SyncBatchNorm")
a = parse(p)
dist, rank, world, local = init_distributed()
torch.backends.cudnn.benchmark = True


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = 4 * width
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)), inplace=True)
        out = F.relu(self.bn2(self.conv2(out)), inplace=True)
        out = self.bn3(self.conv3(out))
        return F.relu(out + (x if self.down is None else self.down(x)), inplace=True)


class ResNet50(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = 4 * width
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x)), inplace=True), 3, stride=2, padding=1)
        x = self.layers(x)
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


torch.manual_seed(a.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
model = ResNet50(a.classes)
if not a.fixed:
    model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
model = model.to(device="cuda", memory_format=torch.channels_last)
net = DDP(model, device_ids=[local])
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-5, foreach=True)
g = torch.Generator(device="cuda").manual_seed(a.seed + rank)  # each rank its own data
batches = [(torch.randn(a.batch, 3, a.image, a.image, device="cuda", generator=g).contiguous(memory_format=torch.channels_last),
            torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(net(x), y)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", rank {rank}")
print(f"rank {rank} loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
dist.destroy_process_group()
