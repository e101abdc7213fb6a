"""Batch scoring job of a two-tower recommender's user side (nightly candidate re-ranking), float32 inference with TF32
matmuls, torch.inference_mode(): per user the last 512 watched item ids (left-aligned, padded with id 0; 128-512 valid)
and the last 128 search-query tokens (32-128 valid) are pooled by masked means over their embeddings (item table
1,000,000 x 128 and token table 250,000 x 128, float32), concatenated with 32 dense features through Linear 32 -> 128
+ ReLU, and a tower MLP 384 -> 1024 -> 512 -> 128 (ReLU) gives the user vector; the user's 100 candidate items
(embedded with the same item table) are scored by dot products and the top 10 kept. 16384 users per batch (synthetic,
resident on the GPU, three batches used in turn); the host kept one batch ahead by an event sync on the previous one.
The pooling is written the obvious way, emb(ids) * mask[..., None] summed over the history and divided by the length:
each table lookup materializes a [16384, 512, 128] (and [16384, 128, 128]) float32 tensor of gathered rows, the mask
multiply writes a second one and the sum reads it back, where an embedding bag reads each row once and writes only the
pooled [16384, 128].
No NVTX ranges.

--fixed: F.embedding_bag(ids, weight, mode="sum", per_sample_weights=mask) divided by the length (the same result
without the [B, L, 128] intermediates).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=30)
p.add_argument("--batch", type=int, default=16384, help="users per batch")
p.add_argument("--hist", type=int, default=512, help="watched-item history length (padded)")
p.add_argument("--query", type=int, default=128, help="search-token history length (padded)")
p.add_argument("--dim", type=int, default=128, help="embedding width")
p.add_argument("--items", type=int, default=1000000, help="rows of the item table")
p.add_argument("--tokens", type=int, default=250000, help="rows of the token table")
p.add_argument("--dense", type=int, default=32, help="dense features")
p.add_argument("--cands", type=int, default=100, help="candidates scored per user")
p.add_argument("--topk", type=int, default=10)
p.add_argument("--fixed", action="store_true", help="F.embedding_bag pooling")
a = parse(p)
torch.set_float32_matmul_precision("high")  # the serving config: TF32 for the float32 MLP


class UserTower(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.dim
        self.item_emb = nn.Embedding(a.items, d, padding_idx=0)
        self.token_emb = nn.Embedding(a.tokens, d, padding_idx=0)
        self.dense = nn.Linear(a.dense, d)
        self.mlp = nn.Sequential(nn.Linear(3 * d, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, d))

    def pool(self, table, ids, lengths):
        """Masked mean of the first `lengths` rows of each history: [B, L] ids -> [B, d]."""
        mask = (torch.arange(ids.shape[1], device=ids.device) < lengths[:, None]).to(table.weight.dtype)
        denom = lengths.clamp(min=1).unsqueeze(1).to(table.weight.dtype)
        if a.fixed:
            pooled = F.embedding_bag(ids, table.weight, mode="sum", per_sample_weights=mask)
        else:
            pooled = (table(ids) * mask.unsqueeze(-1)).sum(dim=1)
        return pooled / denom

    def forward(self, hist, hist_len, query, query_len, dense, cands):
        u = torch.cat([self.pool(self.item_emb, hist, hist_len), self.pool(self.token_emb, query, query_len),
                       F.relu(self.dense(dense))], dim=1)
        u = self.mlp(u)  # [B, d]
        c = self.item_emb(cands)  # [B, K, d]
        scores = torch.bmm(c, u.unsqueeze(-1)).squeeze(-1)  # [B, K]
        return scores.topk(a.topk, dim=1)


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = UserTower()
model.eval()
model.requires_grad_(False)
g = torch.Generator(device="cuda").manual_seed(a.seed)


def make_batch():
    B = a.batch
    hist_len = torch.randint(a.hist // 4, a.hist + 1, (B,), device="cuda", generator=g)
    hist = torch.randint(1, a.items, (B, a.hist), device="cuda", generator=g)
    hist = hist.masked_fill(torch.arange(a.hist, device="cuda") >= hist_len[:, None], 0)
    query_len = torch.randint(a.query // 4, a.query + 1, (B,), device="cuda", generator=g)
    query = torch.randint(1, a.tokens, (B, a.query), device="cuda", generator=g)
    query = query.masked_fill(torch.arange(a.query, device="cuda") >= query_len[:, None], 0)
    dense = torch.randn(B, a.dense, device="cuda", generator=g)
    cands = torch.randint(1, a.items, (B, a.cands), device="cuda", generator=g)
    return hist, hist_len, query, query_len, dense, cands


batches = [make_batch() for _ in range(3)]
top_ids = torch.empty(a.steps, a.batch, a.topk, dtype=torch.long, device="cuda")
torch.cuda.synchronize()
print(f"pooling {'embedding_bag' if a.fixed else 'gather * mask, sum'}; tables "
      f"{sum(q.numel() for q in model.parameters()) * 4 / 1e9:.2f} GB", flush=True)

throttle, clock = Throttle(1), StepClock(a)
with torch.inference_mode():
    for step in range(a.steps):
        clock.at(step)
        top = model(*batches[step % len(batches)])
        top_ids[step] = top.indices
        throttle.step_done()
    clock.end()
print("first user's top candidates (last batch)", top_ids[-1, 0].tolist())
