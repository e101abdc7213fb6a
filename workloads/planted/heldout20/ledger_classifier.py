"""Training of a transaction classifier for a payments ledger: a bias-free MLP 1024 -> 4096 -> 4096 -> 512 (GELU)
over 32768 transaction embeddings per step, bf16 autocast on float32 weights, fused AdamW, cross-entropy over 512
merchant categories. Embeddings are synthetic and resident on the GPU (two batches used in turn); the host kept one
step ahead by an event sync on the previous step.
Telemetry: every step the loop records the GPU's temperature, power draw, utilization and memory use next to the
step's number by running `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` (subprocess.run, output
captured) and appending the parsed line to a telemetry list.
NVTX: step_N > forward / backward / optimizer / telemetry.

--fixed: the telemetry is sampled once every 100 steps (a 14-step run samples at step 0 only).
"""
import os
import subprocess
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=32768)
p.add_argument("--features", type=int, default=1024)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--classes", type=int, default=512)
p.add_argument("--every", type=int, default=1, help="telemetry every N steps")
p.add_argument("--fixed", action="store_true", help="telemetry every 100 steps")
a = parse(p)
every = 100 if a.fixed else a.every

QUERY = ["nvidia-smi", "--query-gpu=index,temperature.gpu,power.draw,utilization.gpu,memory.used",
         "--format=csv,noheader,nounits", "-i", os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"]
telemetry = []


def sample(step):
    try:
        r = subprocess.run(QUERY, capture_output=True, text=True, timeout=30)
        telemetry.append((step, r.stdout.strip()))
    except (OSError, subprocess.SubprocessError) as e:
        telemetry.append((step, f"error: {e}"))


model = MLP([a.features, a.hidden, a.hidden, a.classes]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
xs = [torch.randn(a.batch, a.features, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2)]
ys = [torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g) for _ in range(2)]
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"ledger MLP, {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M parameters, batch {a.batch}", flush=True)

throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        x, y = xs[step % 2], ys[step % 2]
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logit = model(x)
            loss = F.cross_entropy(logit.float(), y)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        with nvtx("telemetry"):
            if step % every == 0:
                sample(step)
        throttle.step_done()
clock.end()
print("last loss", float(losses[-1]), "telemetry samples", len(telemetry), telemetry[-1][1][:60] if telemetry else "")
