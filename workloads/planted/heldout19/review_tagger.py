"""Fine-tuning of a review-tagging head: a bias-free MLP 1024 -> 4096 -> 4096 -> 64 (GELU) over 32768 review
embeddings per step, bf16 autocast on float32 weights, fused AdamW, multi-label BCE over 64 tags. Embeddings are
synthetic and resident on the GPU (two batches used in turn); the host kept one step ahead by an event sync on the
previous step.
Metrics: the 64 per-tag losses of each step are copied to pinned host memory (non_blocking) and read two steps later
(no wait); the main thread appends them to a rolling history (the last 4096 steps of each tag, resumed with the run)
and hands the history to a background "dashboard" thread through a queue; that thread serializes the whole history
with json.dumps every step to push it to the dashboard.
NVTX: step_N > forward / backward / optimizer / metrics.

--fixed: the background thread serializes only the new step's 64 values (the dashboard appends them).
"""
import json
import os
import queue
import random
import sys
import threading

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=32768)
p.add_argument("--features", type=int, default=1024)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--tags", type=int, default=64)
p.add_argument("--window", type=int, default=4096, help="steps of history kept per tag")
p.add_argument("--fixed", action="store_true", help="serialize only the new values")
a = parse(p)

rnd = random.Random(a.seed)
history = {f"tag_{t:02d}_loss": [rnd.random() for _ in range(a.window)] for t in range(a.tags)}
sent = []
jobs = queue.Queue()


def dashboard():
    while True:
        item = jobs.get()
        if item is None:
            return
        sent.append(len(json.dumps(item)))


th = threading.Thread(target=dashboard, daemon=True)
th.start()

model = MLP([a.features, a.hidden, a.hidden, a.tags]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
xs = [torch.randn(a.batch, a.features, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2)]
ys = [(torch.rand(a.batch, a.tags, device="cuda", generator=g) < 0.05).float() for _ in range(2)]
host_m = [torch.zeros(a.tags, pin_memory=True) for _ in range(3)]
torch.cuda.synchronize()
print(f"tagging MLP, {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M parameters, batch {a.batch}", flush=True)

throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        x, y = xs[step % 2], ys[step % 2]
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logit = model(x)
            per_tag = F.binary_cross_entropy_with_logits(logit.float(), y, reduction="none").mean(0)
            loss = per_tag.sum()
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        with nvtx("metrics"):
            if step > 1:  # step N-2's values: the throttle waited for the end of step N-2 before this step began
                prev = host_m[(step - 2) % 3].tolist()
                new = {}
                for t, (k, v) in enumerate(history.items()):
                    v.pop(0)
                    v.append(prev[t])
                    new[k] = prev[t]
                jobs.put(new if a.fixed else history)
            host_m[step % 3].copy_(per_tag.detach(), non_blocking=True)
        throttle.step_done()
clock.end()
jobs.put(None)
th.join()
print("dashboard payloads", len(sent), "last", sent[-1] if sent else 0, "bytes")
