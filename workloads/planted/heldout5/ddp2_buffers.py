"""2-rank DDP training of a tagger on frozen pretrained token vectors: each row is 8 token ids looked up in a
frozen 1.5 M x 128 bf16 table (384 MB) that the model registers as a buffer (register_buffer, so that it is saved
with the checkpoint), concatenated to 1024 features, then a GELU MLP 1024 -> 4096 -> 4096 -> 4096 -> 1 (fp32
parameters, bf16 autocast), mean squared error, fused AdamW; 8192 rows per rank per step (resident on the GPU, two
batches used alternately), the host kept one step ahead by an event sync on the previous step. DDP is built with its
defaults, so broadcast_buffers=True: at every forward DDP broadcasts every module buffer from rank 0, the 384 MB
table included, before the forward can start on either rank.
NVTX: step_N > forward / backward / optimizer.

--fixed: DistributedDataParallel(..., broadcast_buffers=False) (the table never changes).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import MLP, StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--rows", type=int, default=8192, help="rows per rank per step")
p.add_argument("--vocab", type=int, default=1_500_000)
p.add_argument("--emb-dim", type=int, default=128)
p.add_argument("--tokens", type=int, default=8, help="token ids per row")
p.add_argument("--hidden", default="4096,4096,4096")
p.add_argument("--fixed", action="store_true", help="broadcast_buffers=False")
a = parse(p)
dist, rank, world, local = init_distributed()


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1234)  # the same frozen table on every rank
        self.register_buffer("table", (torch.randn(a.vocab, a.emb_dim, generator=g) * 0.1).to(torch.bfloat16))
        self.mlp = MLP([a.tokens * a.emb_dim] + [int(v) for v in a.hidden.split(",")] + [1])

    def forward(self, ids):
        x = F.embedding(ids, self.table).flatten(1)
        return self.mlp(x)


torch.manual_seed(a.seed)
model = Tagger().cuda()
ddp = DDP(model, device_ids=[local], broadcast_buffers=not a.fixed)
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed + 17 * rank)
batches = [(torch.randint(0, a.vocab, (a.rows, a.tokens), device="cuda", generator=g),
            torch.randn(a.rows, 1, device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ids, y = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = ddp(ids)
            loss = (out.float() - y).pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", rank {rank}")
print(f"rank {rank} loss first/last", float(losses[0]), float(losses[-1]))
dist.destroy_process_group()
