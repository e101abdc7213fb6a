"""Two problems at once. (1) The trunk runs in bf16 autocast but the output head (4096 -> 3072 classes)
is kept in fp32 outside autocast "for stability", with TF32 off (PyTorch's default): the head's three
GEMMs run as CUDA-core SGEMM, the larger problem. (2) Each step's input batch (8192 x 1024 fp32,
34 MB) comes from pageable host memory with a blocking x.to("cuda"), serialized with compute.
Cross-entropy on fp32 logits, fused AdamW. NVTX: step_N > data / forward / backward / optimizer.

--fixed: the top finding's fix only, TF32 on (torch.backends.cuda.matmul.allow_tf32 and
cudnn.allow_tf32); the pageable input copy stays (and becomes the larger share of the step).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import MLP, StepClock, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--rows", type=int, default=8192)
p.add_argument("--dims", default="1024,4096,8192,4096", help="trunk widths (bf16 autocast)")
p.add_argument("--vocab", type=int, default=3072, help="classes of the fp32 head")
p.add_argument("--fixed", action="store_true", help="allow TF32 tensor cores for fp32 GEMMs")
a = parse(p)

torch.backends.cuda.matmul.allow_tf32 = a.fixed
torch.backends.cudnn.allow_tf32 = a.fixed

dims = [int(v) for v in a.dims.split(",")]
trunk = MLP(dims).cuda()
head = nn.Linear(dims[-1], a.vocab, bias=False).cuda()
opt = torch.optim.AdamW(list(trunk.parameters()) + list(head.parameters()), lr=1e-4, fused=True)
host = [torch.randn(a.rows, dims[0], device="cuda").cpu() for _ in range(4)]  # pageable host batches
target = torch.randint(0, a.vocab, (a.rows,), device="cuda")
losses = torch.zeros(a.steps, device="cuda")
clock = StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with nvtx("data"):
            x = host[step % len(host)].to("cuda")  # pageable: blocks the host until copied
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                h = trunk(x)
            logits = head(h.float())
            loss = F.cross_entropy(logits, target)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
clock.end(f", tf32 {'on' if a.fixed else 'off'}")
print("final loss", float(losses[-1]))
