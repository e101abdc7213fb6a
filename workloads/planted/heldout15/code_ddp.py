"""2-rank data-parallel fine-tuning (torchrun --nproc_per_node=2) of a GPT-2-style code model on a company's
repositories: token embeddings of width 1024 (GPT-2's byte-level BPE vocabulary, 50257 tokens padded to 50304 rows)
plus learned positions (1024), 16 pre-LN causal blocks (LayerNorm, fused QKV projection, 16 heads of 64 through
F.scaled_dot_product_attention with is_causal=True, output projection, residual; LayerNorm, GELU MLP 1024 -> 4096 ->
1024, residual; biases everywhere), a final LayerNorm and an LM head tied to the token embedding (254 M parameters); bf16
autocast over fp32 weights, cross-entropy, gradient clipping at 1.0, fused AdamW, DistributedDataParallel with its
defaults. 16 sequences of 1024 tokens per GPU and step (synthetic ids, resident on the GPU, two batches per rank used
alternately); the host kept one step ahead by an event sync on the previous step.
After the optimizer, every step computes the global next-token accuracy for the dashboard with the trainer's
"gather for metrics" helper: the logits [16, 1024, 50304], cast to float32 (3.3 GB per rank: the metric code was
written for NumPy, which has no bf16), and the targets are all-gathered from both ranks with
dist.all_gather_into_tensor into [32, 1024, 50304] on every rank, then argmax and compared with the gathered targets;
the accuracy goes into a GPU history read after the loop (no host synchronization).
NVTX: step_N > forward / backward / optimizer / metrics.

--fixed: the accuracy's numerator computed locally (argmax of the local logits, compared and summed) and only that
count all-reduced (one float per rank).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--batch", type=int, default=16, help="sequences per GPU and step")
p.add_argument("--seq", type=int, default=1024)
p.add_argument("--vocab", type=int, default=50304)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--heads", type=int, default=16)
p.add_argument("--blocks", type=int, default=16)
p.add_argument("--fixed", action="store_true", help="local accuracy count + all_reduce of one number")
a = parse(p)
dist, rank, world, local = init_distributed()


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        B, S, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(B, S, self.nh, d // self.nh).transpose(1, 2) for t in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(B, S, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CodeLM(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.tok = nn.Embedding(a.vocab, d)
        self.pos = nn.Parameter(torch.zeros(a.seq, d))
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.norm = nn.LayerNorm(d)

    def forward(self, ids):
        h = self.tok(ids) + self.pos[:ids.shape[1]]
        for blk in self.blocks:
            h = blk(h)
        return F.linear(self.norm(h), self.tok.weight)  # tied LM head: [B, S, V]


torch.manual_seed(a.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
with torch.device("cuda"):
    model = CodeLM()
for name, q in model.named_parameters():
    if name.endswith("bias"):
        nn.init.zeros_(q)
    elif q.dim() >= 2:
        nn.init.normal_(q, std=0.02)
net = DDP(model, device_ids=[local])
decay = [q for n, q in model.named_parameters() if q.dim() >= 2]
no_decay = [q for n, q in model.named_parameters() if q.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=1e-4, betas=(0.9, 0.95), fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed + rank)  # each rank its own data
data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda", generator=g) for _ in range(2)]
acc_hist = torch.zeros(a.steps, device="cuda")
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
if rank == 0:
    print(f"metrics: {'local count + all_reduce' if a.fixed else 'all_gather of logits and targets'}, "
          f"logits per rank {a.batch * a.seq * a.vocab * 4 / 1e9:.2f} GB in float32", flush=True)


def gather_for_metrics(t):
    """The trainer's helper: every rank's tensor, concatenated along dim 0, on every rank."""
    out = torch.empty((world * t.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype, device=t.device)
    dist.all_gather_into_tensor(out, t.contiguous())
    return out


throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    seq = data[step % len(data)]
    ids, targets = seq[:, :-1], seq[:, 1:]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = net(ids)
                loss = F.cross_entropy(logits.view(-1, a.vocab), targets.reshape(-1))
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        with nvtx("metrics"):
            if a.fixed:
                correct = (logits.detach().argmax(dim=-1) == targets).float().sum()
                dist.all_reduce(correct)
                acc_hist[step] = correct / (world * targets.numel())
            else:
                all_logits = gather_for_metrics(logits.detach().float())
                all_targets = gather_for_metrics(targets)
                acc_hist[step] = (all_logits.argmax(dim=-1) == all_targets).float().mean()
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", rank {rank}")
if rank == 0:
    print("loss first/last", float(losses[0]), float(losses[-1]), "accuracy last", float(acc_hist[-1]),
          f"params {sum(q.numel() for q in model.parameters()) / 1e6:.0f} M")
dist.destroy_process_group()
