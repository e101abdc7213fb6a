"""Offline click-through-rate scoring with a DLRM-style model, float32 inference with TF32 matmuls,
torch.inference_mode(): per sample 13 dense features through a bottom MLP 13 -> 512 -> 256 -> 128 (ReLU) and 26
categorical features, one id each, looked up in 26 embedding tables of 300,000 x 128 (float32, stored as one
concatenated 7.8 M x 128 table with per-feature offsets, 4.0 GB); pairwise dot products of the 27 vectors (351 of
them) concatenated with the bottom output, a top MLP 479 -> 1024 -> 1024 -> 512 -> 256 -> 1 and a sigmoid. 32768
samples per batch; the input pipeline hands each batch over in pinned host memory (ids int64 [32768, 26] with the
offsets applied, dense float32 [32768, 13]; four batches used in turn); scores stay on the GPU; the host kept one batch
ahead by an event sync on the previous one.
The serving code comes from the model's first deployment on 16 GB cards: the embedding table stays in host memory and
the lookup runs on the CPU (F.embedding on the CPU tensor), and the gathered rows ([32768, 26, 128] float32, 436 MB, a
fresh pageable tensor every batch) are copied to the GPU; only the MLPs and the interaction run on the GPU.
No NVTX ranges.

--fixed: the table on the GPU (4 GB of the 141): the ids are copied over (6.8 MB, pinned) and gathered there.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--batch", type=int, default=32768)
p.add_argument("--dense", type=int, default=13)
p.add_argument("--sparse", type=int, default=26, help="categorical features (one table each)")
p.add_argument("--rows", type=int, default=300000, help="rows per table")
p.add_argument("--dim", type=int, default=128)
p.add_argument("--fixed", action="store_true", help="embedding table on the GPU")
a = parse(p)
torch.set_float32_matmul_precision("high")
F_ = a.sparse + 1  # vectors in the interaction


def mlp(dims, last_act=True):
    layers = []
    for i, (x, y) in enumerate(zip(dims, dims[1:])):
        layers.append(nn.Linear(x, y))
        if last_act or i < len(dims) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self):
        super().__init__()
        self.bottom = mlp([a.dense, 512, 256, a.dim])
        n_pairs = F_ * (F_ - 1) // 2
        self.top = mlp([n_pairs + a.dim, 1024, 1024, 512, 256, 1], last_act=False)
        iu = torch.triu_indices(F_, F_, offset=1)
        self.register_buffer("iu", iu[0] * F_ + iu[1], persistent=False)

    def forward(self, dense, rows):  # dense [B, 13], rows [B, 26, d] (on the GPU)
        x = self.bottom(dense)
        z = torch.cat([x.unsqueeze(1), rows], dim=1)          # [B, 27, d]
        inter = torch.bmm(z, z.transpose(1, 2)).flatten(1)    # [B, 27 * 27]
        return torch.sigmoid(self.top(torch.cat([x, inter[:, self.iu]], dim=1))).squeeze(1)


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = DLRM()
model.eval()
model.requires_grad_(False)

n_rows = a.sparse * a.rows
if a.fixed:
    table = torch.randn(n_rows, a.dim, device="cuda") * 0.01
else:  # host-resident table (built on the GPU in chunks, then moved)
    table = torch.empty(n_rows, a.dim)
    for i in range(0, n_rows, 1 << 20):
        j = min(n_rows, i + (1 << 20))
        table[i:j] = (torch.randn(j - i, a.dim, device="cuda") * 0.01).cpu()
offsets = torch.arange(a.sparse, device="cuda") * a.rows
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = []
for _ in range(4):
    ids = (torch.randint(0, a.rows, (a.batch, a.sparse), device="cuda", generator=g) + offsets).cpu().pin_memory()
    dense = torch.randn(a.batch, a.dense, device="cuda", generator=g).cpu().pin_memory()
    batches.append((ids, dense))
scores = torch.empty(a.steps, a.batch, device="cuda")
torch.cuda.synchronize()
print(f"embedding table {n_rows * a.dim * 4 / 1e9:.2f} GB on the {'GPU' if a.fixed else 'CPU'}, "
      f"{a.batch} samples per batch", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        ids, dense = batches[step % len(batches)]
        dense_d = dense.to("cuda", non_blocking=True)
        if a.fixed:
            rows = F.embedding(ids.to("cuda", non_blocking=True), table)
        else:
            rows = F.embedding(ids, table).to("cuda", non_blocking=True)  # CPU gather, pageable copy
        scores[step] = model(dense_d, rows)
        throttle.step_done()
    clock.end()
print("mean score (last batch)", float(scores[-1].mean()))
