"""Healthy single-GPU training: two pre-LayerNorm transformer blocks (d_model 4096, 32 heads, causal
SDPA attention, GELU MLP of 4 x d_model), pure bf16 parameters, fused Adam, the batch resident on the
GPU, the host kept one step ahead by an event sync on the previous step (never a GPU wait). Nothing
planted: the truth is "nothing above low". NVTX: step_N > forward / backward / optimizer.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--batch", type=int, default=6)
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--d-model", type=int, default=4096)
p.add_argument("--heads", type=int, default=32)
p.add_argument("--blocks", type=int, default=2)
p.add_argument("--head", type=int, default=256)
a = parse(p)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.up = nn.Linear(d, 4 * d, bias=False)
        self.down = nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.out = nn.Linear(a.d_model, a.head, bias=False)

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return self.out(x)


model = Model().cuda().to(torch.bfloat16)
opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(a.batch, a.seq, a.d_model, device="cuda", dtype=torch.bfloat16)
losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            loss = model(x).float().pow(2).mean()
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("final loss", float(losses[-1]))
