"""Offline batch scoring with a LoRA-fine-tuned encoder (a relevance scorer): token embedding (vocabulary 32000), 4
pre-LayerNorm bidirectional blocks of d_model 3584 (28 heads of 128, separate q / k / v / o projections,
scaled_dot_product_attention, GELU MLP of 14336), a final LayerNorm, mean pooling and a 1-wide score head with a
sigmoid; bf16 weights, torch.inference_mode, 8 documents of 1024 tokens per batch (ids resident on the GPU, cycled
from a pool), scores written into a ring buffer on the GPU (read once at the end), the host kept at most two batches
ahead by an event sync. The fine-tune left rank-16 LoRA adapters (alpha 32) on every projection (q, k, v, o, up,
down), applied the way PEFT applies them before merging: base(x) + lora_B(lora_A(dropout(x))) * scaling, so each
adapted Linear runs its base GEMM, two thin GEMMs (in -> 16 -> out), a scaling multiply and an add.
NVTX: step_N per batch.

--fixed: the adapters are merged into the base weights once before the loop (W + scaling * B @ A, as PEFT's
merge_and_unload), checked against the unmerged model; each projection is then one GEMM.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=8, help="documents per batch")
p.add_argument("--seq", type=int, default=1024, help="tokens per document")
p.add_argument("--d-model", type=int, default=3584)
p.add_argument("--heads", type=int, default=28)
p.add_argument("--ffn", type=int, default=14336)
p.add_argument("--blocks", type=int, default=4)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--rank", type=int, default=16, help="LoRA rank")
p.add_argument("--alpha", type=float, default=32.0, help="LoRA alpha (scaling = alpha / rank)")
p.add_argument("--pool", type=int, default=4, help="distinct document batches, cycled")
p.add_argument("--ring", type=int, default=64, help="score slots on the GPU")
p.add_argument("--fixed", action="store_true", help="merge the adapters into the base weights before the loop")
a = parse(p)


class LoRALinear(nn.Module):
    """A bias-free Linear with a LoRA adapter, applied as PEFT does while unmerged."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.base_layer = nn.Linear(d_in, d_out, bias=False)
        self.lora_A = nn.Linear(d_in, a.rank, bias=False)
        self.lora_B = nn.Linear(a.rank, d_out, bias=False)
        self.lora_dropout = nn.Dropout(0.05)
        self.scaling = a.alpha / a.rank
        self.merged = False
        nn.init.normal_(self.lora_B.weight, std=0.02)  # a trained adapter: B is no longer zero

    def merge(self):
        with torch.no_grad():
            delta = (self.lora_B.weight.float() @ self.lora_A.weight.float()) * self.scaling
            self.base_layer.weight.copy_((self.base_layer.weight.float() + delta).to(self.base_layer.weight.dtype))
        self.merged = True

    def forward(self, x):
        result = self.base_layer(x)
        if self.merged:
            return result
        return result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling


class Block(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.o = (LoRALinear(d, d) for _ in range(4))
        self.up, self.down = LoRALinear(d, ffn), LoRALinear(ffn, d)

    def forward(self, x):
        b, s, d = x.shape
        h = self.ln1(x)
        q, k, v = (proj(h).view(b, s, self.heads, d // self.heads).transpose(1, 2) for proj in (self.q, self.k, self.v))
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.o(att.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.d_model)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads, a.ffn) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model)
        self.score = nn.Linear(a.d_model, 1)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return torch.sigmoid(self.score(self.norm(x).mean(dim=1))).squeeze(-1)


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = Scorer()
model = model.to(torch.bfloat16).eval()
g = torch.Generator(device="cuda").manual_seed(a.seed)
pool = [torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g) for _ in range(a.pool)]
ring = torch.zeros(a.ring, a.batch, device="cuda", dtype=torch.bfloat16)

if a.fixed:
    with torch.inference_mode():
        ref = model(pool[0]).float()
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.merge()
    with torch.inference_mode():
        err = float((model(pool[0]).float() - ref).abs().max())
    assert err < 3e-2, f"merged and unmerged scores differ: max abs error {err:.3g}"
    print(f"merged adapters match the unmerged model (max abs score error {err:.1e})", flush=True)
torch.cuda.synchronize()

with torch.inference_mode():
    throttle, clock = Throttle(2), StepClock(a)
    for step in range(a.steps):
        clock.at(step)
        with nvtx(f"step_{step}"):
            ring[step % a.ring].copy_(model(pool[step % len(pool)]))
        throttle.step_done()
    clock.end()
print("mean score", float(ring[:min(a.steps, a.ring)].float().mean()))
