"""Training of a product-category tagger for a retail catalogue: a bias-free MLP 768 -> 4096 -> 4096 -> 4096 (GELU)
over 32768 product embeddings per step, bf16 autocast on float32 weights, fused AdamW, class-weighted cross-entropy
over the 4096 leaf categories. Embeddings are synthetic and resident on the GPU (two batches used in turn); the host
kept one step ahead by an event sync on the previous step.
Taxonomy: the category taxonomy (60000 nodes: path, parent, weight, active flag, synonyms; ~10 MB of JSON, written to
a temporary folder at start-up, standing in for the shared taxonomy file the merchandisers edit) is re-read every
step with json.load so that edits are picked up at once; the loss's per-class weights are rebuilt from it
(torch.tensor of 4096 floats, copied to the GPU).
NVTX: step_N > taxonomy / forward / backward / optimizer.

--fixed: the taxonomy is re-read only when the file's modification time changes (one os.stat per step).
"""
import json
import os
import random
import sys
import tempfile

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn.functional as F

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=32768)
p.add_argument("--features", type=int, default=768)
p.add_argument("--hidden", type=int, default=4096)
p.add_argument("--classes", type=int, default=4096)
p.add_argument("--nodes", type=int, default=60000, help="taxonomy nodes in the JSON file")
p.add_argument("--fixed", action="store_true", help="re-read the taxonomy only when the file changes")
a = parse(p)

rnd = random.Random(a.seed)
words = ["home", "kitchen", "garden", "tools", "toys", "audio", "camera", "sports", "outdoor", "office", "beauty",
         "health", "auto", "pet", "baby", "books"]
tax = {f"c{i:06d}": {"path": "/".join(rnd.choice(words) for _ in range(4)), "parent": f"c{rnd.randrange(max(i, 1)):06d}",
                     "weight": 0.5 + rnd.random(), "active": True,
                     "synonyms": [rnd.choice(words) + str(rnd.randrange(1000)) for _ in range(3)]}
       for i in range(a.nodes)}
tmp = tempfile.mkdtemp(prefix="taxonomy_")
path = os.path.join(tmp, "taxonomy.json")
with open(path, "w") as f:
    json.dump(tax, f)
del tax
leaves = [f"c{a.nodes - a.classes + i:06d}" for i in range(a.classes)]
seen = {"mtime": None, "weight": None}


def class_weights():
    if a.fixed:
        mt = os.stat(path).st_mtime_ns
        if mt == seen["mtime"]:
            return seen["weight"]
        seen["mtime"] = mt
    with open(path) as f:
        t = json.load(f)
    w = torch.tensor([t[k]["weight"] if t[k]["active"] else 0.0 for k in leaves], dtype=torch.float32).to("cuda")
    seen["weight"] = w
    return w


model = MLP([a.features, a.hidden, a.hidden, a.classes]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
xs = [torch.randn(a.batch, a.features, device="cuda", generator=g).to(torch.bfloat16) for _ in range(2)]
ys = [torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g) for _ in range(2)]
losses = torch.zeros(a.steps, device="cuda")
torch.cuda.synchronize()
print(f"tagger MLP, {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M parameters, batch {a.batch}, "
      f"taxonomy {os.path.getsize(path) / 1e6:.1f} MB", flush=True)

throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    with nvtx(f"step_{step}"):
        x, y = xs[step % 2], ys[step % 2]
        with nvtx("taxonomy"):
            w = class_weights()
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logit = model(x)
            loss = F.cross_entropy(logit.float(), y, weight=w)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
os.remove(path)
os.rmdir(tmp)
print("last loss", float(losses[-1]))
