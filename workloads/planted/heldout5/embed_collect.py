"""Embedding extraction (inference, bf16): each step encodes a corpus shard of 32 chunks of 8192 rows with an MLP
encoder 1024 -> 4096 -> 4096 -> 2048 (GELU) and collects the chunk embeddings the way a notebook grows a list:
`out = torch.cat([out, emb])` after every chunk, so chunk k copies all k-1 earlier embeddings again; at the end of
the shard the embeddings are scored against 16 query vectors on the GPU. Inputs resident on the GPU (two shards
used alternately); the host kept one step ahead by an event sync on the previous step.
NVTX: step_N > encode (per chunk: chunk_K) / score.

--fixed: the embeddings are written into a preallocated shard buffer (one copy per chunk), no growing concatenation.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch

from common import MLP, StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--chunk", type=int, default=8192, help="rows per chunk")
p.add_argument("--chunks", type=int, default=32, help="chunks per step (shard)")
p.add_argument("--dims", default="1024,4096,4096,2048")
p.add_argument("--queries", type=int, default=16)
p.add_argument("--fixed", action="store_true", help="preallocated shard buffer")
a = parse(p)

dims = [int(v) for v in a.dims.split(",")]
bf = torch.bfloat16
torch.manual_seed(a.seed)
model = MLP(dims).cuda().to(bf).eval()
g = torch.Generator(device="cuda").manual_seed(a.seed)
shards = [torch.randn(a.chunks * a.chunk, dims[0], device="cuda", generator=g, dtype=bf) for _ in range(2)]
queries = torch.randn(dims[-1], a.queries, device="cuda", generator=g, dtype=bf)
buf = torch.empty(a.chunks * a.chunk, dims[-1], device="cuda", dtype=bf) if a.fixed else None
torch.cuda.synchronize()

scores = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        shard = shards[step % len(shards)]
        with nvtx(f"step_{step}"):
            with nvtx("encode"):
                out = None
                for k in range(a.chunks):
                    with nvtx(f"chunk_{k}"):
                        emb = model(shard[k * a.chunk:(k + 1) * a.chunk])
                        if a.fixed:
                            buf[k * a.chunk:(k + 1) * a.chunk] = emb
                        else:
                            out = emb if out is None else torch.cat([out, emb])
                if a.fixed:
                    out = buf
            with nvtx("score"):
                scores[step] = (out @ queries).float().amax(dim=0).mean()
        throttle.step_done()
clock.end()
print("score first/last", float(scores[0]), float(scores[-1]), "rows per step", out.shape[0])
