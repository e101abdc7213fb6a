"""Online scoring loop of a small ranking transformer (a serving process, no autograd): each call scores 16 requests
of 64 tokens (ids resident on the GPU, cycled from a pool): token embedding + learned positions, 12 pre-LayerNorm
blocks of d_model 512 (8 heads of 64, scaled_dot_product_attention, GELU MLP of 2048, Linear layers with biases),
a final LayerNorm, mean pooling, a 1-wide score head and a sigmoid, in bf16 under torch.no_grad. The scores are
written into a ring buffer on the GPU (read back once at the end); the host is kept at most two calls ahead by an
event sync (it never waits in practice). Every kernel is tiny (1024 tokens x 512), so an eager call is ~139
launches of a few µs of GPU work each. NO NVTX ranges: calls must be found from the kernel pattern.

--fixed: the forward is captured once in a CUDA graph (static id and score buffers, after warm-up calls on a side
stream) and replayed per call: copy the call's ids into the static input, replay, copy the scores into the ring;
checked against the eager forward before the loop.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=150, warmup=10)
p.add_argument("--batch", type=int, default=16, help="requests per call")
p.add_argument("--seq", type=int, default=64, help="tokens per request")
p.add_argument("--d-model", type=int, default=512)
p.add_argument("--heads", type=int, default=8)
p.add_argument("--ffn", type=int, default=2048)
p.add_argument("--blocks", type=int, default=12)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--pool", type=int, default=8, help="distinct request batches, cycled")
p.add_argument("--ring", type=int, default=64, help="score slots on the GPU")
p.add_argument("--fixed", action="store_true", help="replay the forward as one CUDA graph per call")
a = parse(p)


class Block(nn.Module):
    def __init__(self, d, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Ranker(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.d_model)
        self.pos = nn.Parameter(torch.randn(a.seq, a.d_model) * 0.02)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads, a.ffn) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model)
        self.score = nn.Linear(a.d_model, 1)

    def forward(self, ids):
        x = self.embed(ids) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return torch.sigmoid(self.score(self.norm(x).mean(dim=1))).squeeze(-1)


torch.manual_seed(a.seed)
model = Ranker().cuda().to(torch.bfloat16).eval()
g = torch.Generator(device="cuda").manual_seed(a.seed)
pool = [torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g) for _ in range(a.pool)]
ring = torch.zeros(a.ring, a.batch, device="cuda", dtype=torch.bfloat16)

with torch.no_grad():
    if a.fixed:
        static_ids = pool[0].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the graph (cuBLAS workspaces, attention kernels)
            for _ in range(3):
                model(static_ids)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_ids)
        static_ids.copy_(pool[1])
        graph.replay()
        ref = model(pool[1])
        err = float((static_out.float() - ref.float()).abs().max())
        assert err < 2e-2, f"graph replay and eager forward differ: max abs error {err:.3g}"
        print(f"graph replay matches eager (max abs error {err:.1e})", flush=True)
    torch.cuda.synchronize()

    throttle, clock = Throttle(2), StepClock(a)
    for step in range(a.steps):
        clock.at(step)
        ids = pool[step % len(pool)]
        if a.fixed:
            static_ids.copy_(ids)
            graph.replay()
            ring[step % a.ring].copy_(static_out)
        else:
            ring[step % a.ring].copy_(model(ids))
        throttle.step_done()
    clock.end(f", {'CUDA graph' if a.fixed else 'eager'}")
print("mean score", float(ring.float().mean()))
