"""bf16 training of a per-token tagger on variable-length sequences: 16 sequences per step whose real lengths are
drawn uniformly from 64-256 tokens (seeded), each token a 1024-wide feature vector from a frozen frontend; a per-token
GELU MLP 1024 -> 4096 -> 1024 -> 4096 -> 1024 (bias-free) and a 64-way tag head, cross-entropy over the real tokens
only (padding masked out), pure bf16 parameters, fused AdamW. The collate pads every batch to a fixed 2048 tokens
(the maximum the service ever accepts), so the model processes 16 x 2048 = 32768 token rows per step of which
~2560 are real. Features, lengths and tags resident on the GPU (two batches used alternately); the host kept one
step ahead by an event sync on the previous step.
NVTX: step_N > forward / backward / optimizer.

--fixed: pad each batch only to the longest allowed real length (256), 4096 token rows per step.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--min-len", type=int, default=64)
p.add_argument("--max-len", type=int, default=256)
p.add_argument("--pad-to", type=int, default=2048)
p.add_argument("--dims", default="1024,4096,1024,4096,1024,64")
p.add_argument("--fixed", action="store_true", help="pad to --max-len instead of --pad-to")
a = parse(p)

torch.manual_seed(a.seed)
dims = [int(v) for v in a.dims.split(",")]
L = a.max_len if a.fixed else a.pad_to
model = MLP(dims).cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
gl = torch.Generator().manual_seed(a.seed)
batches = []
for _ in range(2):
    lens = torch.randint(a.min_len, a.max_len + 1, (a.batch,), generator=gl)
    mask = (torch.arange(L)[None, :] < lens[:, None]).cuda()                     # (batch, L) real tokens
    x = torch.randn(a.batch, L, dims[0], device="cuda", generator=g, dtype=torch.bfloat16) * mask[..., None]
    tags = torch.randint(0, dims[-1], (a.batch, L), device="cuda", generator=g).masked_fill(~mask, -100)
    batches.append((x, tags, int(lens.sum())))
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    x, tags, real = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            logits = model(x.view(-1, dims[0]))
            loss = F.cross_entropy(logits.float(), tags.view(-1), ignore_index=-100)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]), "rows per step", a.batch * L,
      "real tokens", [b[2] for b in batches])
