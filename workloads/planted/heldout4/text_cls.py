"""bf16 fine-tuning of a text classifier: a bidirectional transformer encoder (token embedding of a 32000 vocabulary,
8 pre-LayerNorm blocks of d_model 1024, 8 heads of 128, scaled_dot_product_attention, GELU MLP of 4096), a final
LayerNorm, mean pooling and a 4-class head; 32 sequences of 512 tokens per step (token batches and labels resident
on the GPU, two batches used alternately). Pure bf16 parameters, fused AdamW, the host kept one step ahead by an
event sync on the previous step. After every optimizer step the loop logs the training accuracy of the batch: it
puts the model in eval mode, runs it again on the same batch under torch.no_grad(), compares the argmax with the
labels and accumulates the count on the GPU (read once at the end).
NVTX: step_N > forward / backward / optimizer / metrics.

--fixed: the accuracy is taken from the logits of the training forward (detached), no second forward.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--batch", type=int, default=32)
p.add_argument("--seq", type=int, default=512)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=8)
p.add_argument("--blocks", type=int, default=8)
p.add_argument("--vocab", type=int, default=32000)
p.add_argument("--classes", type=int, default=4)
p.add_argument("--fixed", action="store_true", help="accuracy from the training forward's logits")
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
        att = F.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.d_model)
        self.blocks = nn.ModuleList(Block(a.d_model, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(a.d_model)
        self.head = nn.Linear(a.d_model, a.classes, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x).mean(dim=1))


torch.manual_seed(a.seed)
model = Classifier().cuda().to(torch.bfloat16)
opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = [(torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g),
            torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g)) for _ in range(2)]
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
correct = torch.zeros((), device="cuda", dtype=torch.long)
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ids, labels = batches[step % len(batches)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            logits = model(ids)
            loss = F.cross_entropy(logits.float(), labels)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        with nvtx("metrics"):
            if a.fixed:
                pred = logits.detach().argmax(dim=-1)
            else:
                model.eval()
                with torch.no_grad():
                    pred = model(ids).argmax(dim=-1)
                model.train()
            correct += (pred == labels).sum()
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]), "train accuracy", float(correct) / (a.steps * a.batch))
