"""Long-document summarization serving, the decode phase of a Llama-style decoder in bf16, torch.inference_mode(): width
4096, 16 layers (RMSNorm, fused QKV projection with grouped-query attention: 32 query heads and 8 key/value heads of
128, rotary positions, output projection; RMSNorm, SwiGLU MLP 4096 -> 11008 -> 4096), vocabulary 32000, untied head;
3.1 B parameters. 32 requests decoded together against a static key/value cache of 16384 positions per request
([32, 8, 16384, 128] bf16 per layer for keys and for values, 34 GB in all), filled by a (synthetic) prefill of 16320
tokens; positions past the current one are masked. One greedy token per loop iteration, the next token fed back on
the GPU; the host kept one step ahead by an event sync on the previous step. The attention is written with two matmuls
(fixed shapes every step) after the modelling code's repeat_kv helper, which expands each key/value head to its 4
query heads and reshapes: a copy of the whole cache, 4 times its size, for keys and for values, in every layer at
every token, which the two matmuls then read back.
NVTX: step_N > forward / sample.

--fixed: no repeat: the query heads are grouped by key/value head (q viewed as [B, 8, 4, 128]) so the matmuls read each
cached key and value once.
"""
import math
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=32, help="requests decoded together")
p.add_argument("--ctx", type=int, default=16384, help="static cache length per request")
p.add_argument("--prefill", type=int, default=16320, help="positions already in the cache")
p.add_argument("--d-model", type=int, default=4096)
p.add_argument("--heads", type=int, default=32)
p.add_argument("--kv-heads", type=int, default=8)
p.add_argument("--layers", type=int, default=16)
p.add_argument("--ffn", type=int, default=11008)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--fixed", action="store_true", help="grouped query heads, no repeat_kv copy")
a = parse(p)
assert a.prefill + a.steps <= a.ctx

KW = dict(device="cuda", dtype=torch.bfloat16)
B, T, H, HKV = a.batch, a.ctx, a.heads, a.kv_heads
D = a.d_model // H
G = H // HKV


def repeat_kv(x, n_rep):
    """[B, HKV, T, D] -> [B, HKV * n_rep, T, D] (the modelling code's helper)."""
    b, hkv, t, d = x.shape
    return x[:, :, None, :, :].expand(b, hkv, n_rep, t, d).reshape(b, hkv * n_rep, t, d)


def rotate_half(x):
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat((-x2, x1), dim=-1)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.norm1 = nn.RMSNorm(d, eps=1e-5, **KW)
        self.qkv = nn.Linear(d, (H + 2 * HKV) * D, bias=False, **KW)
        self.o = nn.Linear(H * D, d, bias=False, **KW)
        self.norm2 = nn.RMSNorm(d, eps=1e-5, **KW)
        self.gate_up = nn.Linear(d, 2 * a.ffn, bias=False, **KW)
        self.down = nn.Linear(a.ffn, d, bias=False, **KW)
        # the static cache, prefilled (synthetic keys / values for the first `prefill` positions)
        self.register_buffer("k_cache", torch.randn(B, HKV, T, D, **KW), persistent=False)
        self.register_buffer("v_cache", torch.randn(B, HKV, T, D, **KW), persistent=False)

    def forward(self, x, pos, cos, sin, mask):
        h = self.norm1(x)  # [B, 1, d]
        q, k, v = self.qkv(h).split([H * D, HKV * D, HKV * D], dim=-1)
        q = q.view(B, 1, H, D).transpose(1, 2)    # [B, H, 1, D]
        k = k.view(B, 1, HKV, D).transpose(1, 2)  # [B, HKV, 1, D]
        v = v.view(B, 1, HKV, D).transpose(1, 2)
        q = (q * cos + rotate_half(q) * sin) * (1.0 / math.sqrt(D))
        k = k * cos + rotate_half(k) * sin
        self.k_cache[:, :, pos] = k[:, :, 0]
        self.v_cache[:, :, pos] = v[:, :, 0]
        if a.fixed:
            qg = q.reshape(B, HKV, G, D)                                   # query heads grouped by kv head
            s = torch.matmul(qg, self.k_cache.transpose(-1, -2)) + mask     # [B, HKV, G, T]
            pr = torch.softmax(s, dim=-1, dtype=torch.float32).to(x.dtype)
            o = torch.matmul(pr, self.v_cache).reshape(B, 1, H * D)        # [B, HKV, G, D]
        else:
            k_all = repeat_kv(self.k_cache, G)                             # [B, H, T, D], a copy
            v_all = repeat_kv(self.v_cache, G)
            s = torch.matmul(q, k_all.transpose(-1, -2)) + mask             # [B, H, 1, T]
            pr = torch.softmax(s, dim=-1, dtype=torch.float32).to(x.dtype)
            o = torch.matmul(pr, v_all).transpose(1, 2).reshape(B, 1, H * D)
        x = x + self.o(o)
        gate, up = self.gate_up(self.norm2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.d_model, **KW)
        self.layers = nn.ModuleList(Layer() for _ in range(a.layers))
        self.norm = nn.RMSNorm(a.d_model, eps=1e-5, **KW)
        self.head = nn.Linear(a.d_model, a.vocab, bias=False, **KW)
        inv = 1.0 / (500000.0 ** (torch.arange(0, D, 2, device="cuda", dtype=torch.float32) / D))
        ang = torch.outer(torch.arange(T, device="cuda", dtype=torch.float32), inv)
        ang = torch.cat((ang, ang), dim=-1)
        self.register_buffer("cos", ang.cos().to(torch.bfloat16), persistent=False)  # [T, D]
        self.register_buffer("sin", ang.sin().to(torch.bfloat16), persistent=False)

    def forward(self, tok, pos, mask):
        x = self.embed(tok)  # [B, 1, d]
        cos, sin = self.cos[pos], self.sin[pos]
        for layer in self.layers:
            x = layer(x, pos, cos, sin, mask)
        return self.head(self.norm(x))[:, -1]  # [B, V]


torch.manual_seed(a.seed)
with torch.no_grad():
    model = Decoder()
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
model.eval()
model.requires_grad_(False)
mask = torch.full((1, 1, 1, T), float("-inf"), **KW)
mask[..., : a.prefill] = 0.0
g = torch.Generator(device="cuda").manual_seed(a.seed)
tok = torch.randint(0, a.vocab, (B, 1), device="cuda", generator=g)
out_tokens = torch.empty(a.steps, B, dtype=torch.long, device="cuda")
torch.cuda.synchronize()
cache_gb = 2 * a.layers * B * HKV * T * D * 2 / 1e9
print(f"attention {'grouped query heads (no repeat)' if a.fixed else 'repeat_kv + matmul'}, cache {cache_gb:.1f} GB, "
      f"params {sum(q.numel() for q in model.parameters()) / 1e9:.2f} B", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        pos = a.prefill + step
        with nvtx(f"step_{step}"):
            with nvtx("forward"):
                mask[..., pos] = 0.0
                logits = model(tok, pos, mask)
            with nvtx("sample"):
                tok = logits.argmax(dim=-1, keepdim=True)
                out_tokens[step] = tok[:, 0]
            throttle.step_done()
    clock.end()
print("first request's tokens", out_tokens[:, 0].tolist())
