"""Data-parallel training (torchrun --nproc_per_node=2; runs with any rank count) of a sequential recommender's user
model: each user's event history (one 512-feature vector per event, from a frozen content encoder) goes through a
bias-free GELU event encoder 512 -> 4096 -> 4096 -> 4096 -> 4096 -> 1024, is sum-pooled per user (index_add_) and divided by the
history length, then a user tower 1024 -> 1024 -> 1 predicts a click (binary cross-entropy). bf16 autocast, fp32
parameters (57.7 M), DDP with default buckets, fused AdamW. Every step draws a global batch of 16 users per rank
from one seeded generator (the same on every rank); history lengths are heavy-tailed (55 % of users 64-255 events,
30 % 256-1023, 12 % 1024-4095, 3 % 4096-16383). Each rank takes every world-th user of the batch (DistributedSampler
order) and packs its users' events into one tensor, padded to a multiple of 256 events. The batches are staged on
the GPU before the loop (event features, segment ids, labels), and one forward + backward at the largest packed
size warms the caching allocator.
NVTX: step_N > forward / backward / optimizer.

--fixed: the global batch is assigned to ranks longest-first, each user to the rank with the fewest events so far
(event-balanced), instead of every world-th user.
"""
import os
import random
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)


def history_lengths(seed, step, users_per_rank, world, balance=False, pad=256):
    """One step's history lengths per rank, and the padded event count of each rank. A shared seeded draw (the same on
    every rank; random() and randint() only, so any Python 3 reproduces it); rank r takes users r, r + world,
    ... (DistributedSampler order), or with balance, longest first to the rank with the fewest events so far."""
    rng = random.Random(seed * 1000003 + step)
    lens = []
    for _ in range(users_per_rank * world):
        u = rng.random()
        lo, hi = (64, 255) if u < 0.55 else (256, 1023) if u < 0.85 else (1024, 4095) if u < 0.97 else (4096, 16383)
        lens.append(rng.randint(lo, hi))
    if balance:
        per, tot = [[] for _ in range(world)], [0] * world
        for n in sorted(lens, reverse=True):
            i = min(range(world), key=lambda j: (tot[j], j))
            per[i].append(n)
            tot[i] += n
    else:
        per = [lens[r::world] for r in range(world)]
    return per, [-(-sum(p) // pad) * pad for p in per]


import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--users", type=int, default=16, help="users per rank per step")
p.add_argument("--feat", type=int, default=512, help="features per event")
p.add_argument("--event-dims", default="4096,4096,4096,4096,1024", help="event encoder widths after the input")
p.add_argument("--pad", type=int, default=256, help="packed events padded to a multiple of this")
p.add_argument("--fixed", action="store_true", help="event-balanced assignment of users to ranks")
a = parse(p)

dist, rank, world, local = init_distributed()
enc_dims = [a.feat] + [int(v) for v in a.event_dims.split(",")]
torch.manual_seed(a.seed)


class UserModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.events = MLP(enc_dims)
        self.tower = MLP([enc_dims[-1], 1024, 1])

    def forward(self, ev, seg, lengths):
        h = self.events(ev).float()                                            # [events, 1024]
        pooled = torch.zeros(lengths.numel() + 1, h.shape[1], device=h.device).index_add_(0, seg, h)
        return self.tower(pooled[:-1] / lengths[:, None]).squeeze(-1)          # the last row holds the padding


model = UserModel().cuda()
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4, weight_decay=0.01, fused=True)

# Stage every step's packed batch on the GPU: event features (bf16, from one shared pool), the user of each event
# (padding events go to an extra last row), history lengths and click labels.
plan = [history_lengths(a.seed, s, a.users, world, a.fixed, a.pad) for s in range(a.steps)]
most = max(n for _, padded in plan for n in padded)
g = torch.Generator(device="cuda").manual_seed(a.seed + rank)
feats = torch.randn(most, a.feat, device="cuda", generator=g).to(torch.bfloat16)
batches = []
for s, (per, padded) in enumerate(plan):
    lens = per[rank]
    seg = torch.repeat_interleave(torch.arange(len(lens)), torch.tensor(lens))
    seg = torch.cat([seg, torch.full((padded[rank] - seg.numel(),), len(lens))]).cuda()
    labels = torch.randint(0, 2, (len(lens),), device="cuda", generator=g).float()
    batches.append((feats[:padded[rank]], seg, torch.tensor(lens, device="cuda", dtype=torch.float32), labels))


def train_step(ev, seg, lengths, labels):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logit = ddp(ev, seg, lengths)
    return F.binary_cross_entropy_with_logits(logit.float(), labels)


# Warm the caching allocator at the largest packed size (no optimizer step).
warm_seg = torch.zeros(most, dtype=torch.long, device="cuda")
train_step(feats, warm_seg, torch.full((1,), float(most), device="cuda"), torch.zeros(1, device="cuda")).backward()
opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ev, seg, lengths, labels = batches[step]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            loss = train_step(ev, seg, lengths, labels)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end(f", rank {rank} of {world}, {sum(int(b[0].shape[0]) for b in batches[a.warmup:])} events on this rank")
print("loss first/last", float(losses[0]), float(losses[-1]))
dist.destroy_process_group()
