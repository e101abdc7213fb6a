"""Training of an answer re-ranker for a support search engine: 512 queries per step, each with up to 64 candidate
answers (16-64 per query; the candidate lists are padded to 64), each (query, answer) pair a 1024-wide feature vector
scored by a bias-free MLP 1024 -> 4096 -> 4096 -> 1 (GELU), bf16 autocast on float32 weights, fused AdamW. Features,
list lengths and the index of the clicked answer are synthetic (features resident on the GPU, two batches in turn; the
lengths are host-side lists, as the batcher produces them).
The listwise loss is the softmax cross-entropy of the clicked answer among a query's real candidates, computed query by
query in a Python loop over the batch (scores[i, :n_i] for each query i), and averaged.
NVTX: step_N > forward / loss / backward / optimizer.

--fixed: the same loss in one call: the padded candidates' scores masked to -inf and one F.cross_entropy over the
[512, 64] score matrix.
"""
import os
import random
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--queries", type=int, default=512)
p.add_argument("--candidates", type=int, default=64, help="padded list length")
p.add_argument("--min-candidates", type=int, default=16)
p.add_argument("--features", type=int, default=1024)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--fixed", action="store_true", help="masked, batched cross-entropy")
a = parse(p)

Q, C = a.queries, a.candidates
model = MLP([a.features, a.hidden, a.hidden, 1]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
rnd = random.Random(a.seed)
batches = []
for _ in range(2):
    feats = torch.randn(Q * C, a.features, device="cuda", generator=g).to(torch.bfloat16)
    lens = [rnd.randint(a.min_candidates, C) for _ in range(Q)]
    clicked = [rnd.randrange(n) for n in lens]
    tgt = torch.tensor(clicked, device="cuda")
    pad = torch.arange(C).unsqueeze(0) >= torch.tensor(lens).unsqueeze(1)  # [Q, C] True on padding
    batches.append((feats, lens, tgt, pad.cuda()))
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"re-ranker MLP, {Q} queries x {C} candidates per step, loss "
      f"{'batched' if a.fixed else 'per query'}", flush=True)

throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        feats, lens, tgt, pad = batches[step % 2]
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                scores = model(feats).float().view(Q, C)
        with nvtx("loss"):
            if a.fixed:
                loss = F.cross_entropy(scores.masked_fill(pad, float("-inf")), tgt)
            else:
                total = 0.0
                for i in range(Q):
                    total = total + F.cross_entropy(scores[i, : lens[i]], tgt[i])
                loss = total / Q
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("last loss", float(losses[-1]))
