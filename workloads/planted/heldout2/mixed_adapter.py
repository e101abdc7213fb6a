"""Inference serving loop (no autograd) of a bf16 feature encoder (4 pre-LayerNorm MLP blocks, 4096 ->
8192 -> 4096, GELU) followed by 2 bottleneck adapter blocks (4096 -> 512 -> 4096, GELU, residual) that
were added after the model had been converted to bf16, so they stayed fp32: each adapter casts its input
to fp32 (x.float(), the fix for a dtype-mismatch error) and runs its two GEMMs in fp32 with TF32 off
(PyTorch's default), i.e. as CUDA-core SGEMM, then casts back. 8192 tokens per iteration.

Before the loop, a host-only start-up phase: the weights are made on the CPU (as when reading a
checkpoint) and copied over, and the request pool is tokenised/bucketed in plain Python. The loop has NO
NVTX ranges and no kernel that runs once per iteration (4 encoder blocks, 2 adapters): iterations must be
found from the kernel pattern. The host never syncs (it runs ahead).

--fixed: the adapters are converted to bf16 with the rest (no casts; bf16 tensor-core GEMMs).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, parse, parser

p = parser(__doc__, steps=40)
p.add_argument("--tokens", type=int, default=8192)
p.add_argument("--d-model", type=int, default=4096)
p.add_argument("--ffn", type=int, default=8192)
p.add_argument("--blocks", type=int, default=4)
p.add_argument("--adapters", type=int, default=2)
p.add_argument("--adapter-dim", type=int, default=512)
p.add_argument("--requests", type=int, default=200000, help="synthetic requests tokenised on the host at start-up")
p.add_argument("--fixed", action="store_true", help="adapters in bf16 like the rest of the model")
a = parse(p)

torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default, stated
torch.backends.cudnn.allow_tf32 = False


class EncoderBlock(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.up = nn.Linear(d, f, bias=False)
        self.down = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.ln(x))))


class Adapter(nn.Module):
    def __init__(self, d, r):
        super().__init__()
        self.up = nn.Linear(d, r, bias=False)
        self.down = nn.Linear(r, d, bias=False)

    def forward(self, x):
        if self.up.weight.dtype == torch.float32:  # the workaround for "expected both operands to be the same dtype"
            h = x.float()
            return (h + self.down(F.gelu(self.up(h)))).to(x.dtype)
        return x + self.down(F.gelu(self.up(x)))


# ---- host start-up: weights made on the CPU (a stand-in for loading a checkpoint), requests tokenised in Python
t_start = time.perf_counter()
torch.manual_seed(a.seed)
encoder = nn.Sequential(*[EncoderBlock(a.d_model, a.ffn) for _ in range(a.blocks)])
adapters = nn.Sequential(*[Adapter(a.d_model, a.adapter_dim) for _ in range(a.adapters)])
with torch.no_grad():
    for m in adapters:
        m.down.weight.mul_(0.1)  # adapters start near identity
encoder = encoder.to(torch.bfloat16).cuda().eval()
adapters = adapters.cuda().eval()  # added after the conversion: still fp32
if a.fixed:
    adapters = adapters.to(torch.bfloat16)

vocab = {}
buckets = [[] for _ in range(16)]
for i in range(a.requests):  # a toy tokenizer: word ids by first sight, requests bucketed by length
    words = [f"w{(i * 7919 + j * 104729) % 50021}" for j in range(1 + i % 23)]
    ids = [vocab.setdefault(w, len(vocab)) for w in words]
    buckets[len(ids) % 16].append(ids)
lengths = torch.tensor([len(b) for b in buckets], dtype=torch.float32)
print(f"start-up on the host: {time.perf_counter() - t_start:.2f} s, vocabulary {len(vocab)}, "
      f"requests per bucket {int(lengths.min())}-{int(lengths.max())}", flush=True)

# Request features: 4 batches resident on the GPU, cycled.
g = torch.Generator(device="cuda").manual_seed(a.seed)
pool = [torch.randn(a.tokens, a.d_model, device="cuda", generator=g).to(torch.bfloat16) for _ in range(4)]
torch.cuda.synchronize()

clock = StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        out = adapters(encoder(pool[step % len(pool)]))
    clock.end(f", adapters {'bf16' if a.fixed else 'fp32 (TF32 off)'}")
    print("checksum", float(out.float().abs().mean()))
