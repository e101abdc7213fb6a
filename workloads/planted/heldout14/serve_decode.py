"""Batched greedy decoding in an offline generation job (summaries of long documents): a decoder-only model of 12 pre-LN
blocks of width 2048 (LayerNorm, fused QKV projection, 16 heads of 128, output projection, residual; LayerNorm, GELU
MLP 2048 -> 8192 -> 2048, residual; biases everywhere), learned positions (8192), a final LayerNorm and an untied LM
head over a 32000-token vocabulary (752 M parameters, bf16 weights), torch.inference_mode(). 32 requests, each with a
7680-token prompt already prefilled into a preallocated key/value cache ([32, 16, 8192, 128] per block for keys and
for values; the prompts' keys and values are synthetic), decode together, one token per step: embed the 32 last
tokens, run every block over them (the new key and value written into the cache at the position, attention over the
cache up to it with two batched matmuls and a float32 softmax), take the head's argmax as the next tokens. The host is
kept one token ahead by an event sync on the previous token.
The engine allocates the cache with torch.zeros(..., device="cuda") and no dtype, so it is float32 (PyTorch's default
dtype) while the model computes in bf16; the attention reads it as cache[:, :, :n].to(q.dtype), which copies and casts
the whole used part of the cache (keys and values: 2 x 32 x 2048 x n values per block) on every token before the
matmuls read the copy.
No NVTX ranges.

--fixed: the cache allocated in the model's dtype (bf16); .to(q.dtype) is then a no-op and the matmuls read the cache
in place.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=24)
p.add_argument("--batch", type=int, default=32, help="requests decoded together")
p.add_argument("--prompt", type=int, default=7680, help="prompt tokens already in the cache")
p.add_argument("--max-len", type=int, default=8192, help="cache positions per request")
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=12)
p.add_argument("--fixed", action="store_true", help="cache in bf16 (the model's dtype)")
a = parse(p)
if a.prompt + a.steps > a.max_len:
    p.error(f"--prompt ({a.prompt}) + --steps ({a.steps}) exceed --max-len ({a.max_len})")

KW = dict(device="cuda", dtype=torch.bfloat16)


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh, self.hd = nh, d // nh
        self.scale = self.hd ** -0.5
        self.ln1 = nn.LayerNorm(d, **KW)
        self.qkv = nn.Linear(d, 3 * d, **KW)
        self.proj = nn.Linear(d, d, **KW)
        self.ln2 = nn.LayerNorm(d, **KW)
        self.fc1 = nn.Linear(d, 4 * d, **KW)
        self.fc2 = nn.Linear(4 * d, d, **KW)

    def forward(self, x, cache, pos):
        B, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, 3, self.nh, self.hd).unbind(1)  # [B, nh, hd] each
        k_cache, v_cache = cache
        k_cache[:, :, pos] = k
        v_cache[:, :, pos] = v
        keys = k_cache[:, :, :pos + 1].to(q.dtype)  # [B, nh, n, hd]
        values = v_cache[:, :, :pos + 1].to(q.dtype)
        att = torch.matmul(q.unsqueeze(2), keys.transpose(-1, -2)) * self.scale  # [B, nh, 1, n]
        att = torch.softmax(att.float(), dim=-1).to(q.dtype)
        o = torch.matmul(att, values).reshape(B, d)  # [B, nh, 1, hd] -> [B, d]
        x = x + self.proj(o)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.tok = nn.Embedding(a.vocab, d, **KW)
        self.pos = nn.Parameter(torch.zeros(a.max_len, d, **KW))
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d, **KW)
        self.head = nn.Linear(d, a.vocab, bias=False, **KW)

    def decode_step(self, tokens, pos, caches):
        """One token for every request: tokens [B] -> next tokens [B] (greedy)."""
        x = self.tok(tokens) + self.pos[pos]
        for blk, cache in zip(self.blocks, caches):
            x = blk(x, cache, pos)
        return self.head(self.norm(x)).argmax(dim=-1)


torch.manual_seed(a.seed)
model = Decoder()
model.requires_grad_(False)
model.eval()
for name, q in model.named_parameters():
    if name.endswith("bias"):
        nn.init.zeros_(q)
    elif q.dim() >= 2:
        nn.init.normal_(q, std=0.02)

hd = a.d_model // a.heads
cache_dtype = torch.bfloat16 if a.fixed else torch.get_default_dtype()  # the engine passed no dtype: float32
caches = [tuple(torch.zeros(a.batch, a.heads, a.max_len, hd, device="cuda", dtype=cache_dtype) for _ in range(2))
          for _ in range(a.blocks)]
g = torch.Generator(device="cuda").manual_seed(a.seed)
with torch.inference_mode():
    for k_cache, v_cache in caches:  # the prompts' keys and values (synthetic), as the prefill left them
        k_cache[:, :, :a.prompt].normal_(0.0, 1.0, generator=g)
        v_cache[:, :, :a.prompt].normal_(0.0, 1.0, generator=g)
tokens = torch.randint(0, a.vocab, (a.batch,), device="cuda", generator=g)
generated = torch.empty(a.steps, a.batch, dtype=torch.long, device="cuda")
torch.cuda.synchronize()
print(f"cache {caches[0][0].dtype}, {sum(t.numel() * t.element_size() for c in caches for t in c) / 1e9:.1f} GB", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        tokens = model.decode_step(tokens, a.prompt + step, caches)
        generated[step] = tokens
        throttle.step_done()
    clock.end()
print("generated", generated.shape[0], "tokens per request; first request's last ids", generated[-4:, 0].tolist(),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.0f} M")
