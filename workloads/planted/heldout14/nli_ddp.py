"""2-rank data-parallel fine-tuning (torchrun --nproc_per_node=2) of a BERT-base encoder for 3-way natural-language
inference (entailment / neutral / contradiction): token, position and segment embeddings (vocabulary 30522, 512
positions, 2 segments) and a LayerNorm, 12 post-LN blocks of width 768 (fused QKV projection, 12 heads of 64 through
F.scaled_dot_product_attention, output projection, residual, LayerNorm; GELU MLP 768 -> 3072 -> 768, residual,
LayerNorm; biases everywhere), a tanh pooler on the [CLS] position and a 3-way classifier (109 M parameters); bf16
autocast over fp32 weights, cross-entropy, gradient clipping at 1.0, fused AdamW with a linear warm-up set per step,
DistributedDataParallel with its defaults. 256 premise-hypothesis pairs per GPU and step, packed to 128 tokens
(synthetic, resident on the GPU, two batches per rank used alternately); the host kept one step ahead by an event
sync on the previous step.
After the optimizer, every step logs its metrics the way the team's trainer does: each rank builds a dict of Python
floats (loss, accuracy, gradient norm, learning rate and the F1 of each class, each computed on the GPU and read with
.item()), and dist.all_gather_object collects the dicts so rank 0 can average them into its running log.
all_gather_object pickles the dict, copies the bytes and their length to the GPU, all-gathers the lengths, reads the
largest back, all-gathers the padded bytes and copies each rank's bytes back to unpickle them.
NVTX: step_N > forward / backward / optimizer / logging.

--fixed: the metrics stay on the GPU: stacked into one tensor, summed over the ranks with dist.all_reduce (no host
round trip) and kept in a GPU history that is read once, after the loop.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from common import StepClock, Throttle, init_distributed, nvtx, parse, parser

p = parser(__doc__, steps=20)
p.add_argument("--batch", type=int, default=256, help="sequence pairs per GPU and step")
p.add_argument("--seq", type=int, default=128)
p.add_argument("--vocab", type=int, default=30522)
p.add_argument("--d-model", type=int, default=768)
p.add_argument("--heads", type=int, default=12)
p.add_argument("--blocks", type=int, default=12)
p.add_argument("--classes", type=int, default=3)
p.add_argument("--fixed", action="store_true", help="metrics as GPU tensors, all_reduce instead of all_gather_object")
a = parse(p)
dist, rank, world, local = init_distributed()
CLASS_NAMES = ("entailment", "neutral", "contradiction")[:a.classes]


class Block(nn.Module):
    def __init__(self, d, nh):
        super().__init__()
        self.nh = nh
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x):
        B, S, d = x.shape
        q, k, v = self.qkv(x).view(B, S, 3, self.nh, d // self.nh).permute(2, 0, 3, 1, 4).unbind(0)
        att = F.scaled_dot_product_attention(q, k, v)
        x = self.ln1(x + self.proj(att.transpose(1, 2).reshape(B, S, d)))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class BertClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        d = a.d_model
        self.tok = nn.Embedding(a.vocab, d)
        self.pos = nn.Embedding(512, d)
        self.seg = nn.Embedding(2, d)
        self.ln_emb = nn.LayerNorm(d)
        self.blocks = nn.ModuleList(Block(d, a.heads) for _ in range(a.blocks))
        self.pooler = nn.Linear(d, d)
        self.cls = nn.Linear(d, a.classes)

    def forward(self, ids, segments):
        x = self.ln_emb(self.tok(ids) + self.pos.weight[:ids.shape[1]] + self.seg(segments))
        for blk in self.blocks:
            x = blk(x)
        return self.cls(torch.tanh(self.pooler(x[:, 0])))


def metrics_dict(loss, logits, labels, grad_norm, lr):
    """The trainer's per-step metrics as Python floats."""
    preds = logits.argmax(dim=-1)
    m = {"loss": loss.item(), "accuracy": (preds == labels).float().mean().item(), "grad_norm": grad_norm.item(),
         "lr": lr}
    for c, name in enumerate(CLASS_NAMES):
        pc, lc = preds == c, labels == c
        tp = (pc & lc).sum()
        prec = tp / pc.sum().clamp(min=1)
        rec = tp / lc.sum().clamp(min=1)
        m[f"f1_{name}"] = (2 * prec * rec / (prec + rec).clamp(min=1e-8)).item()
    return m


def metrics_tensor(loss, logits, labels, grad_norm):
    """The same metrics (but the learning rate) as one float32 tensor on the GPU."""
    preds = logits.argmax(dim=-1)
    vals = [loss.detach().float(), (preds == labels).float().mean(), grad_norm.float()]
    for c in range(len(CLASS_NAMES)):
        pc, lc = preds == c, labels == c
        tp = (pc & lc).sum()
        prec = tp / pc.sum().clamp(min=1)
        rec = tp / lc.sum().clamp(min=1)
        vals.append(2 * prec * rec / (prec + rec).clamp(min=1e-8))
    return torch.stack(vals)


torch.manual_seed(a.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
with torch.device("cuda"):
    model = BertClassifier()
for name, q in model.named_parameters():
    if name.endswith("bias"):
        nn.init.zeros_(q)
    elif q.dim() == 2:
        nn.init.normal_(q, std=0.02)
net = DDP(model, device_ids=[local])
opt = torch.optim.AdamW(model.parameters(), lr=2e-5, weight_decay=0.01, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed + rank)  # each rank its own data
segments = (torch.arange(a.seq, device="cuda") >= a.seq // 2).long().expand(a.batch, -1)  # premise | hypothesis
batches = [(torch.randint(0, a.vocab, (a.batch, a.seq), device="cuda", generator=g),
            torch.randint(0, a.classes, (a.batch,), device="cuda", generator=g)) for _ in range(2)]
n_metrics = 3 + len(CLASS_NAMES)
history = []  # rank 0's running log (planted)
hist = torch.zeros(a.steps, n_metrics, device="cuda")  # fixed: the same metrics, on the GPU
torch.cuda.synchronize()


def lr_at(step):
    return 2e-5 * min(1.0, (step + 1) / 10)


throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    ids, labels = batches[step % len(batches)]
    lr = lr_at(step)
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = net(ids, segments)
                loss = F.cross_entropy(logits, labels)
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            for group in opt.param_groups:
                group["lr"] = lr
            opt.step()
            opt.zero_grad(set_to_none=True)
        with nvtx("logging"):
            if a.fixed:
                row = metrics_tensor(loss, logits, labels, grad_norm)
                dist.all_reduce(row)
                hist[step] = row / world
            else:
                m = metrics_dict(loss, logits, labels, grad_norm, lr)
                gathered = [None] * world
                dist.all_gather_object(gathered, m)
                if rank == 0:
                    history.append({k: sum(x[k] for x in gathered) / world for k in m})
        throttle.step_done()
clock.end(f", rank {rank}")
last = history[-1] if (history and not a.fixed) else dict(zip(["loss", "accuracy", "grad_norm"] + [f"f1_{n}" for n in CLASS_NAMES],
                                                             hist[-1].tolist()))
if rank == 0:
    print("last step (mean over ranks):", {k: round(v, 6) for k, v in last.items()})
dist.destroy_process_group()
