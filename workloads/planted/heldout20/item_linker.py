"""Near-duplicate linking for a product catalogue: each step takes a batch of 24576 item embeddings (128 features,
bf16), builds a dense affinity graph A = softmax(E E^T / sqrt(128)) over the batch, and propagates the items' 256
signal features two hops over it (h = A A V) to score duplicate clusters. Inference only (torch.inference_mode);
everything synthetic and resident on the GPU (two batches used in turn); the host kept one step ahead by an event
sync on the previous step.
The two hops are written as the graph's square times the signals: (A @ A) @ V.
NVTX: step_N > affinity / propagate / score.

--fixed: the same two hops applied right to left, A @ (A @ V).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--items", type=int, default=24576, help="items per batch (graph nodes)")
p.add_argument("--dim", type=int, default=128)
p.add_argument("--signals", type=int, default=256)
p.add_argument("--fixed", action="store_true", help="propagate right to left: A @ (A @ V)")
a = parse(p)

g = torch.Generator(device="cuda").manual_seed(a.seed)
batches = []
for _ in range(2):
    e = (torch.randn(a.items, a.dim, device="cuda", generator=g) / a.dim ** 0.25).to(torch.bfloat16)
    v = torch.randn(a.items, a.signals, device="cuda", generator=g).to(torch.bfloat16)
    batches.append((e, v))
scores = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"catalogue linking, {a.items} items x {a.dim} features, {a.signals} signals, two hops", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        with nvtx(f"step_{step}"):
            e, v = batches[step % 2]
            with nvtx("affinity"):
                adj = torch.softmax(e @ e.t(), dim=1)
            with nvtx("propagate"):
                if a.fixed:
                    h = adj @ (adj @ v)
                else:
                    h = (adj @ adj) @ v
            with nvtx("score"):
                scores[step] = (h.float() * v.float()).sum(1).amax()
            throttle.step_done()
clock.end()
print("last score", float(scores[-1]))
