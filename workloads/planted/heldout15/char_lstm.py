"""Training of a byte-level LSTM language model (a text-normalization team's model): byte embeddings (256 x 512), two
stacked LSTM layers of 1024 units, a linear head to the 256 byte values and the cross-entropy of the next byte; float32
weights with TF32 matmuls (torch.set_float32_matmul_precision("high"); cuDNN's TF32 on by default), clipping at 1.0,
fused Adam. Truncated back-propagation through time: 128 sequences per step, 128 time steps each (synthetic bytes,
resident on the GPU, two batches used alternately), the final hidden and cell states carried (detached) into the next
step; the host kept one step ahead by an event sync on the previous step (15 M parameters).
The recurrence is written by hand with nn.LSTMCell, "so that per-step tricks can be added later": a Python loop over
the 128 time steps and, inside it, over the 2 layers. Every cell call is an op issued from Python that launches two
small GEMMs (M = 128 rows) and the fused cell kernel, and the backward walks 256 cells one by one (the fused cell's
backward, four small GEMMs, and an add that accumulates each weight's gradient over the time steps), so the host issues
thousands of microsecond-sized kernels per step and the GPU waits for it.
NVTX: step_N > forward / backward / optimizer.

--fixed: one nn.LSTM(512, 1024, num_layers=2, batch_first=True) (cuDNN's fused multi-layer RNN: the input projections
of all time steps as one GEMM per layer, the recurrence inside cuDNN, the weight gradients as one GEMM per matrix).
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

p = parser(__doc__, steps=14)
p.add_argument("--batch", type=int, default=128, help="sequences per step")
p.add_argument("--seq", type=int, default=128, help="time steps per step (truncated BPTT)")
p.add_argument("--emb", type=int, default=512)
p.add_argument("--hidden", type=int, default=1024)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--vocab", type=int, default=256)
p.add_argument("--fixed", action="store_true", help="nn.LSTM (cuDNN) instead of the LSTMCell loop")
a = parse(p)
torch.set_float32_matmul_precision("high")  # TF32 matmuls (cuDNN's TF32 is on by default)


class ByteLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(a.vocab, a.emb)
        if a.fixed:
            self.rnn = nn.LSTM(a.emb, a.hidden, num_layers=a.layers, batch_first=True)
        else:
            self.cells = nn.ModuleList(nn.LSTMCell(a.emb if i == 0 else a.hidden, a.hidden) for i in range(a.layers))
        self.head = nn.Linear(a.hidden, a.vocab)

    def forward(self, x, state):
        """x [B, T] byte ids, state ([L, B, H], [L, B, H]) -> logits [B, T, V], new state."""
        e = self.emb(x)  # [B, T, E]
        if a.fixed:
            out, (h, c) = self.rnn(e, state)
            return self.head(out), (h, c)
        h, c = list(state[0].unbind(0)), list(state[1].unbind(0))
        outs = []
        for x_t in e.unbind(1):  # the hand-written recurrence
            inp = x_t
            for layer, cell in enumerate(self.cells):
                h[layer], c[layer] = cell(inp, (h[layer], c[layer]))
                inp = h[layer]
            outs.append(inp)
        return self.head(torch.stack(outs, dim=1)), (torch.stack(h), torch.stack(c))


torch.manual_seed(a.seed)
with torch.device("cuda"):
    model = ByteLM()
opt = torch.optim.Adam(model.parameters(), lr=2e-3, fused=True)
g = torch.Generator(device="cuda").manual_seed(a.seed)
data = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), device="cuda", generator=g) for _ in range(2)]
state = (torch.zeros(a.layers, a.batch, a.hidden, device="cuda"), torch.zeros(a.layers, a.batch, a.hidden, device="cuda"))
torch.cuda.synchronize()
print(f"recurrence: {'nn.LSTM (cuDNN)' if a.fixed else 'nn.LSTMCell loop'}, {a.seq} steps x {a.layers} layers", flush=True)

losses = torch.zeros(a.steps, device="cuda")
throttle, clock = Throttle(1), StepClock(a)
for step in range(a.steps):
    clock.at(step)
    seq = data[step % len(data)]
    with nvtx(f"step_{step}"):
        with nvtx("forward"):
            logits, state = model(seq[:, :-1], state)
            loss = F.cross_entropy(logits.reshape(-1, a.vocab), seq[:, 1:].reshape(-1))
        with nvtx("backward"):
            loss.backward()
        with nvtx("optimizer"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
        state = (state[0].detach(), state[1].detach())
        losses[step] = loss.detach()
        throttle.step_done()
clock.end()
print("loss first/last", float(losses[0]), float(losses[-1]),
      f"params {sum(q.numel() for q in model.parameters()) / 1e6:.1f} M")
