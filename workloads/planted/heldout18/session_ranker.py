"""Training of a click-through ranking model: a bias-free MLP 512 -> 4096 -> 4096 -> 1024 -> 1 (GELU) over 32768
impressions per step, bf16 autocast on float32 weights, fused AdamW, binary cross-entropy. Impression features are
synthetic and resident on the GPU (two batches used in turn); the host kept one step ahead by an event sync on the
previous step.
Host side: a session cache (a dict of user id -> [last_seen, clicks, segment] lists, 1.5 M users) built at start-up;
every step updates the entries of the 256 users whose sessions the batch closes. At the end of every step the loop
calls gc.collect() "to keep host memory flat": a full collection walks every tracked container object of the
process, the 1.5 M session lists included, while the GPU has finished the step and waits.
NVTX: step_N > forward / backward / optimizer / bookkeeping.

--fixed: no gc.collect() in the loop; gc.freeze() once after the cache is built (the long-lived cache leaves the
collector's generations), automatic collection left on.
"""
import gc
import os
import random
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=32768, help="impressions per step")
p.add_argument("--features", type=int, default=512)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--users", type=int, default=1_500_000, help="entries of the host-side session cache")
p.add_argument("--touched", type=int, default=256, help="cache entries updated per step")
p.add_argument("--fixed", action="store_true", help="no per-step gc.collect(); gc.freeze() after start-up")
a = parse(p)

# ---- host-side session cache (built with the collector paused, as a loader would) -------------------------------
gc.disable()
rnd = random.Random(a.seed)
sessions = {}
for u in range(a.users):
    sessions[u] = [rnd.random() * 86400.0, rnd.randrange(200), u % 48]
gc.enable()
if a.fixed:
    gc.freeze()

# ---- model ---------------------------------------------------------------------------------------------------------
model = MLP([a.features, a.hidden, a.hidden, a.hidden // 4, 1]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
xs = [torch.randn(a.batch, a.features, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2)]
ys = [(torch.rand(a.batch, 1, device="cuda", generator=g) < 0.1).float() for _ in range(2)]
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"ranking MLP, {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M parameters, batch {a.batch}, "
      f"{len(sessions)} cached sessions", flush=True)

throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        x, y = xs[step % 2], ys[step % 2]
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logit = model(x)
            loss = F.binary_cross_entropy_with_logits(logit.float(), y)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        with nvtx("bookkeeping"):
            for _ in range(a.touched):
                s = sessions[rnd.randrange(a.users)]
                s[0] = float(step)
                s[1] += 1
            if not a.fixed:
                gc.collect()
        throttle.step_done()
clock.end()
print("last loss", float(losses[-1]))
