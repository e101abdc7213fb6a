"""Query-document relevance scoring with a residual MLP, float32 inference with TF32 matmuls, torch.inference_mode():
each request brings 4096 candidate feature vectors (512 features each); an input projection 512 -> 2048, 8 residual
blocks (LayerNorm, Linear 2048 -> 8192, GELU, Linear 8192 -> 2048, residual add), a final LayerNorm and a linear head to
one score per candidate, then the top 100 candidates are kept (on the GPU). 4096 rows per step (synthetic, resident on
the GPU, three batches used in turn); the host kept one step ahead by an event sync on the previous step.
The blocks' 16 large weight matrices were magnitude-pruned to 50 % density by the compression team and the loader
stores every pruned matrix as a torch sparse CSR tensor "so that the zeros are skipped": each pruned Linear is computed
as torch.sparse.mm(W_csr, x.t()).t() + bias, i.e. a cuSPARSE SpMM in float32 (CUDA cores, no TF32, no tensor cores) over
8.4 M non-zeros per matrix, where the same matrix stored dense (zeros included) is a TF32 tensor-core GEMM.
NVTX: step_N > forward / select.

--fixed: the pruned weights kept dense (zeros stored): F.linear on the TF32 tensor cores; same values, same scores.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--rows", type=int, default=4096, help="candidates scored per step")
p.add_argument("--features", type=int, default=512)
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--hidden", type=int, default=8192)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--density", type=float, default=0.5, help="fraction of each pruned matrix kept")
p.add_argument("--topk", type=int, default=100)
p.add_argument("--fixed", action="store_true", help="pruned weights stored dense (TF32 GEMMs)")
a = parse(p)
torch.set_float32_matmul_precision("high")  # the serving config: TF32 for float32 matmuls
SPARSE = not a.fixed


def magnitude_prune(w, density):
    """Zero all but the largest-magnitude `density` fraction of w's entries."""
    keep = int(round(w.numel() * density))
    thr = w.abs().flatten().sort().values[w.numel() - keep]
    return torch.where(w.abs() >= thr, w, torch.zeros_like(w))


class PrunedLinear(nn.Module):
    def __init__(self, din, dout):
        super().__init__()
        w = magnitude_prune(torch.randn(dout, din, device="cuda") / din ** 0.5, a.density)
        self.register_buffer("bias", torch.randn(dout, device="cuda") * 0.01)
        self.nnz = int((w != 0).sum())
        # the loader's choice: CSR storage of the pruned matrix (the fix keeps it dense, zeros included)
        self.register_buffer("weight", w.to_sparse_csr() if SPARSE else w)

    def forward(self, x):
        if SPARSE:
            return torch.sparse.mm(self.weight, x.t()).t() + self.bias
        return F.linear(x, self.weight, self.bias)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.norm = nn.LayerNorm(d, device="cuda")
        self.fc1 = PrunedLinear(d, h)
        self.fc2 = PrunedLinear(h, d)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(a.features, a.d_model, device="cuda")
        self.blocks = nn.ModuleList(Block(a.d_model, a.hidden) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model, device="cuda")
        self.head = nn.Linear(a.d_model, 1, device="cuda")

    def forward(self, x):
        h = self.inp(x)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h)).squeeze(-1)


torch.manual_seed(a.seed)
model = Scorer()
model.eval()
model.requires_grad_(False)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [torch.randn(a.rows, a.features, device="cuda", generator=g) for _ in range(3)]
top_ids = torch.empty(a.steps, a.topk, dtype=torch.long, device="cuda")
nnz = sum(m.nnz for m in model.modules() if isinstance(m, PrunedLinear))
torch.cuda.synchronize()
print(f"pruned weights stored {'sparse CSR (cuSPARSE SpMM, float32)' if SPARSE else 'dense (TF32 GEMM)'}, "
      f"{nnz / 1e6:.1f} M non-zeros kept", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        with nvtx(f"step_{step}"):
            with nvtx("forward"):
                scores = model(batches[step % len(batches)])
            with nvtx("select"):
                top_ids[step] = scores.topk(a.topk).indices
            throttle.step_done()
    clock.end()
print("top candidates (last step)", top_ids[-1, :5].tolist())
