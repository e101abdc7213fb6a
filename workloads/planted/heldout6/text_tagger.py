"""bf16-autocast training of a token tagger (an embedding 50000 x 1024, a GELU MLP 1024 -> 2048 -> 1024 per token,
a 256-way tag head, cross-entropy; fp32 parameters, fused AdamW) on 128 documents of 512 words per step. The
documents are raw text (lists of word strings, generated once before the loop); every step the main thread
tokenises the next 128 documents in Python (`vocab.get(w.lower(), UNK)` per word), builds the id tensor with
`torch.tensor(list_of_lists)` and copies it to the GPU, then runs the step: no DataLoader, no worker processes,
so the tokenisation of batch N+1 runs on the same thread that issues the GPU work. The host kept at most one step
ahead by an event sync on the previous step. No NVTX ranges.

--fixed: the documents are tokenised once before the loop (as a pre-tokenised dataset, or DataLoader workers,
would); each step takes its ids from a GPU-resident tensor.
"""
import os
import random
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, parse, parser

p = parser(__doc__, steps=25)
p.add_argument("--docs", type=int, default=128, help="documents per step")
p.add_argument("--words", type=int, default=512, help="words per document")
p.add_argument("--vocab", type=int, default=50000)
p.add_argument("--d-model", type=int, default=1024)
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--tags", type=int, default=256)
p.add_argument("--fixed", action="store_true", help="tokenise once before the loop")
a = parse(p)

rnd = random.Random(a.seed)
words = [f"Word{i}" for i in range(a.vocab - 2)]
vocab = {w.lower(): i + 2 for i, w in enumerate(words)}
UNK = 1
pool = 2 * a.docs  # two batches of raw documents, used alternately
docs = [[rnd.choice(words) for _ in range(a.words)] for _ in range(pool)]


def tokenise(batch_docs):
    rows = [[vocab.get(w.lower(), UNK) for w in doc] for doc in batch_docs]
    return torch.tensor(rows, dtype=torch.long).to("cuda")


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(a.vocab, a.d_model)
        self.fc1 = nn.Linear(a.d_model, a.hidden, bias=False)
        self.fc2 = nn.Linear(a.hidden, a.d_model, bias=False)
        self.head = nn.Linear(a.d_model, a.tags, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        x = x + self.fc2(F.gelu(self.fc1(x)))
        return self.head(x)


torch.manual_seed(a.seed)
model = Tagger().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
pre = [tokenise(docs[i * a.docs:(i + 1) * a.docs]) for i in range(2)] if a.fixed else None
torch.cuda.synchronize()

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    k = step % 2
    ids = pre[k] if a.fixed else tokenise(docs[k * a.docs:(k + 1) * a.docs])
    tags = ids % a.tags
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids)
    loss = F.cross_entropy(logits.float().view(-1, a.tags), tags.view(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses[step] = loss.detach()
    throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]))
