"""Greedy generation with a decoder-only chat model: a 32768-token vocabulary embedded to d 3072 with learned positions
(up to 2048), 8 pre-LN blocks (LayerNorm, fused QKV projection, 24 heads of 128 through F.scaled_dot_product_attention,
output projection, residual; LayerNorm, GELU MLP 3072 -> 12288 -> 3072, residual; biases everywhere), a final LayerNorm
and an untied LM head (1.11 B parameters, bf16), under torch.inference_mode(). A batch of 8 prompts of 1024 tokens
(random ids, equal lengths, resident on the GPU) is extended by `--steps` new tokens each, greedy (argmax on the GPU,
written into a preallocated id buffer; no host read inside the loop), the host kept one token ahead by an event sync on
the previous token. The head is applied to the last position only.
The generation loop keeps no key/value cache (the model was exported with use_cache=False): every new token runs the
whole model, causal SDPA, over the prompt and every token generated so far (1024 + step positions per sequence).
NVTX: step_N (one new token per sequence) > forward / sample.

--fixed: a key/value cache preallocated per layer for 1024 + steps positions: step 0 runs the prompt once (prefill)
and fills the cache; every later step runs the model on the one new token per sequence, writing its keys and values
into the cache and attending to the cache.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=32)
p.add_argument("--batch", type=int, default=8, help="prompts decoded together")
p.add_argument("--prompt", type=int, default=1024, help="prompt tokens per sequence")
p.add_argument("--vocab", type=int, default=32768)
p.add_argument("--d-model", type=int, default=3072)
p.add_argument("--heads", type=int, default=24)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--max-pos", type=int, default=2048)
p.add_argument("--fixed", action="store_true", help="key/value cache: prefill once, then one token per step")
a = parse(p)
if a.prompt + a.steps > a.max_pos:
    p.error("--prompt + --steps must not exceed --max-pos")

KW = dict(device="cuda", dtype=torch.bfloat16)


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(d, **KW)
        self.qkv = nn.Linear(d, 3 * d, **KW)
        self.proj = nn.Linear(d, d, **KW)
        self.ln2 = nn.LayerNorm(d, **KW)
        self.fc1 = nn.Linear(d, 4 * d, **KW)
        self.fc2 = nn.Linear(4 * d, d, **KW)

    def forward(self, x, cache=None, pos=0):
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.nh, d // self.nh).unbind(2)  # [B, T, H, hd] each
        if cache is None:
            att = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        else:
            kc, vc = cache  # [B, max_pos, H, hd]
            kc[:, pos:pos + T] = k
            vc[:, pos:pos + T] = v
            kk, vv = kc[:, :pos + T].transpose(1, 2), vc[:, :pos + T].transpose(1, 2)
            # prefill (pos 0): causal over the prompt; decode (one query): every cached key is visible
            att = F.scaled_dot_product_attention(q.transpose(1, 2), kk, vv, is_causal=(pos == 0 and T > 1))
        x = x + self.proj(att.transpose(1, 2).reshape(B, T, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(a.vocab, a.d_model, **KW)
        self.pos = nn.Embedding(a.max_pos, a.d_model, **KW)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model, **KW)
        self.head = nn.Linear(a.d_model, a.vocab, bias=False, **KW)

    def forward(self, ids, caches=None, pos=0):
        T = ids.shape[1]
        h = self.tok(ids) + self.pos.weight[pos:pos + T]
        for i, blk in enumerate(self.blocks):
            h = blk(h, None if caches is None else caches[i], pos)
        return self.head(self.norm(h[:, -1]))  # next-token logits of the last position only


torch.manual_seed(a.seed)
model = LM()
for m in model.modules():  # small weights: activations stay bounded in bf16
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, std=0.02)
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Embedding):
        nn.init.normal_(m.weight, std=0.02)
model.requires_grad_(False)

B, P, H = a.batch, a.prompt, a.heads
hd = a.d_model // H
g = torch.Generator(device="cuda").manual_seed(a.seed)
ids = torch.zeros(B, P + a.steps, dtype=torch.long, device="cuda")
ids[:, :P] = torch.randint(0, a.vocab, (B, P), device="cuda", generator=g)
caches = None
if a.fixed:
    caches = [(torch.zeros(B, a.max_pos, H, hd, **KW), torch.zeros(B, a.max_pos, H, hd, **KW)) for _ in range(a.blocks)]
torch.cuda.synchronize()

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        n = P + step  # tokens known per sequence before this step
        with nvtx(f"step_{step}"):
            with nvtx("forward"):
                if not a.fixed:
                    logits = model(ids[:, :n])  # the whole sequence again, every token
                elif step == 0:
                    logits = model(ids[:, :n], caches, 0)  # prefill: fills the cache
                else:
                    logits = model(ids[:, n - 1:n], caches, n - 1)  # the newest token only
            with nvtx("sample"):
                ids[:, n] = logits.argmax(dim=-1)
            throttle.step_done()
    clock.end()
out = ids[:, P:].cpu()
print("generated", tuple(out.shape), "checksum", int(out.sum()),
      f"params {sum(q.numel() for q in model.parameters()) / 1e9:.2f} B")
