"""bf16 pre-training of a mixture-of-experts decoder-only language model: a 32768-token vocabulary embedded to d 2048,
4 pre-LN causal blocks (LayerNorm, fused QKV projection, 16 heads of 128 through F.scaled_dot_product_attention with
is_causal=True, output projection, residual; LayerNorm, a mixture-of-experts feed-forward layer, residual; biases
everywhere), a final LayerNorm and an untied LM head. Each MoE layer has a router (Linear 2048 -> 8, softmax in float32,
top-2, the two gate weights renormalized) and 8 GELU experts 2048 -> 8192 -> 2048 (1.28 B parameters in all, pure bf16,
fused AdamW). 4 sequences of 2048 tokens per step (ids resident on the GPU, two batches used alternately), the host kept
one step ahead by an event sync on the previous step.
The MoE layer was written as a "soft" loop over the experts, the way its prototype was: the top-2 gate weights are
scattered into a dense [tokens, 8] gate matrix (zero for the 6 experts a token was not routed to) and every expert runs
on every token, its output multiplied by its gate column and summed: out = sum_e gate[:, e] * expert_e(x).
NVTX: step_N > forward / backward / optimizer.

--fixed: capacity-based dispatch (GShard / Switch style): each (token, choice) pair gets a slot in its expert's buffer of
capacity ceil(1.25 * tokens * 2 / 8) (a cumulative sum over a one-hot of the choices; pairs past the capacity would be
dropped: none are at these sizes, the program prints the count), the tokens are gathered into an [8, capacity, 2048]
buffer, the experts run as two batched matmuls over stacked weights, and each token's two outputs are gathered back and
weighted. Checked against the dense loop before training.
"""
import math
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--batch", type=int, default=4, help="sequences per step")
p.add_argument("--seq", type=int, default=2048)
p.add_argument("--vocab", type=int, default=32768)
p.add_argument("--d-model", type=int, default=2048)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=4)
p.add_argument("--experts", type=int, default=8)
p.add_argument("--top-k", type=int, default=2)
p.add_argument("--d-ff", type=int, default=8192, help="hidden width of each expert")
p.add_argument("--capacity-factor", type=float, default=1.25)
p.add_argument("--fixed", action="store_true", help="capacity-based dispatch instead of running every expert on every token")
a = parse(p)

KW = dict(device="cuda", dtype=torch.bfloat16)


def route(router, x, k):
    """Top-k routing: float32 softmax over the experts, the k largest gates renormalized (bf16)."""
    probs = router(x).float().softmax(dim=-1)
    w, idx = probs.topk(k, dim=-1)
    return (w / w.sum(dim=-1, keepdim=True)).to(x.dtype), idx


class Expert(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.fc1 = nn.Linear(d, f, **KW)
        self.fc2 = nn.Linear(f, d, **KW)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class DenseMoE(nn.Module):
    """Every expert on every token, weighted by a dense gate matrix that is zero off the top-k."""

    def __init__(self, d, f, E, k):
        super().__init__()
        self.k = k
        self.router = nn.Linear(d, E, **KW)
        self.experts = nn.ModuleList(Expert(d, f) for _ in range(E))

    def forward(self, x):  # x [tokens, d]
        w, idx = route(self.router, x, self.k)
        gates = torch.zeros(x.shape[0], len(self.experts), device=x.device, dtype=x.dtype).scatter(1, idx, w)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            out = out + gates[:, e:e + 1] * expert(x)
        return out


class DispatchMoE(nn.Module):
    """The same layer with stacked expert weights, tokens dispatched to per-expert buffers of fixed capacity."""

    def __init__(self, d, f, E, k, capacity_factor):
        super().__init__()
        self.E, self.k, self.capacity_factor = E, k, capacity_factor
        self.router = nn.Linear(d, E, **KW)
        self.w1 = nn.Parameter(torch.empty(E, f, d, **KW))  # nn.Linear layout: [out, in]
        self.b1 = nn.Parameter(torch.zeros(E, 1, f, **KW))
        self.w2 = nn.Parameter(torch.empty(E, d, f, **KW))
        self.b2 = nn.Parameter(torch.zeros(E, 1, d, **KW))
        self.dropped = None

    def capacity(self, tokens):
        return int(math.ceil(self.capacity_factor * tokens * self.k / self.E))

    def forward(self, x):  # x [tokens, d]
        T, d = x.shape
        E, k = self.E, self.k
        cap = self.capacity(T)
        w, idx = route(self.router, x, k)
        choice = idx.t().reshape(-1)  # choice-major: every token's first choice, then every second choice [k * T]
        pos = (F.one_hot(choice, E).cumsum(dim=0) - 1).gather(1, choice[:, None]).squeeze(1)  # slot in its expert
        keep = pos < cap
        self.dropped = (~keep).sum()
        slot = torch.where(keep, choice * cap + pos, E * cap)  # E * cap: a sink row for dropped pairs
        src = torch.full((E * cap + 1,), T, dtype=torch.long, device=x.device)  # T: a zero row (empty slots)
        src.scatter_(0, slot, torch.arange(k * T, device=x.device) % T)
        xe = torch.cat([x, x.new_zeros(1, d)])[src[:E * cap]].view(E, cap, d)
        h = F.gelu(torch.baddbmm(self.b1, xe, self.w1.transpose(1, 2)))
        ye = torch.baddbmm(self.b2, h, self.w2.transpose(1, 2)).view(E * cap, d)
        yk = torch.cat([ye, ye.new_zeros(1, d)])[slot].view(k, T, d)  # each token's k expert outputs
        return (yk * w.t().unsqueeze(-1)).sum(dim=0)

    def forward_dense(self, x):
        """Reference: the dense loop over the same weights."""
        w, idx = route(self.router, x, self.k)
        gates = torch.zeros(x.shape[0], self.E, device=x.device, dtype=x.dtype).scatter(1, idx, w)
        out = torch.zeros_like(x)
        for e in range(self.E):
            h = F.gelu(F.linear(x, self.w1[e], self.b1[e, 0]))
            out = out + gates[:, e:e + 1] * F.linear(h, self.w2[e], self.b2[e, 0])
        return out


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(d, **KW)
        self.qkv = nn.Linear(d, 3 * d, **KW)
        self.proj = nn.Linear(d, d, **KW)
        self.ln2 = nn.LayerNorm(d, **KW)
        if a.fixed:
            self.moe = DispatchMoE(d, a.d_ff, a.experts, a.top_k, a.capacity_factor)
        else:
            self.moe = DenseMoE(d, a.d_ff, a.experts, a.top_k)

    def forward(self, x):
        B, S, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(B, S, self.nh, d // self.nh).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(B, S, d))
        return x + self.moe(self.ln2(x).view(B * S, d)).view(B, S, d)


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(a.vocab, a.d_model, **KW)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model, **KW)
        self.head = nn.Linear(a.d_model, a.vocab, **KW)

    def forward(self, ids):
        h = self.tok(ids)
        for blk in self.blocks:
            h = blk(h)
        return self.head(self.norm(h))


torch.manual_seed(a.seed)
model = LM()
for name, q in model.named_parameters():  # small weights: activations stay bounded in bf16
    if name.endswith(("bias", "b1", "b2")):
        nn.init.zeros_(q)
    elif q.dim() >= 2:
        nn.init.normal_(q, std=0.02)

if a.fixed:  # the dispatch path against the dense loop, on the first block's layer, before training
    moe = model.blocks[0].moe
    xs = torch.randn(512, a.d_model, generator=torch.Generator(device="cuda").manual_seed(1), **KW)
    with torch.no_grad():
        got, ref = moe(xs), moe.forward_dense(xs)
    torch.testing.assert_close(got.float(), ref.float(), rtol=3e-2, atol=3e-2)
    print(f"dispatch matches the dense loop ({xs.shape[0]} tokens, {int(moe.dropped)} dropped)", flush=True)

opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda", generator=g) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    seq = data[step % len(data)]
    ids, targets = seq[:, :-1], seq[:, 1:]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            logits = model(ids)
            loss = F.cross_entropy(logits.view(-1, a.vocab), targets.reshape(-1))
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
extra = ""
if a.fixed:
    extra = f", dropped (token, choice) pairs in the last step {sum(int(b.moe.dropped) for b in model.blocks)}"
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e9:.2f} B" + extra)
