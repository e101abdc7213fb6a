"""Learner of an actor-learner reinforcement-learning job (IMPALA-style, one GPU): two actor processes (multiprocessing,
fork, started before CUDA is initialized) play Atari-style environments and produce rollouts of 32 steps x 32
environments: 4 stacked 84 x 84 uint8 frames per observation (28.9 MB per rollout), actions, behaviour-policy logits over
18 actions and n-step returns. The learner takes one rollout per update, copies it to the GPU and trains a Nature-CNN
policy (convolutions 8x8/4, 4x4/2, 3x3/1 with 32, 64, 64 channels, a 512-unit layer, policy and value heads) with a
clipped-importance-weight actor-critic loss, bf16 autocast over fp32 weights and fused Adam; the host kept one update
ahead by an event sync on the previous one. The actors' environment stepping is not modelled (each actor cycles
through two pre-generated rollouts): the learner's side is the subject.
The rollouts travel through one multiprocessing.Queue as dicts of NumPy arrays: the actor's queue feeder thread pickles
each rollout and writes it into a pipe, and the learner's main thread reads the 29 MB back through that pipe in
64 KB pieces and unpickles it into fresh arrays inside queue.get(), before the update can start.
NVTX: step_N > rollout / forward / backward / optimizer.

--fixed: the rollouts live in shared-memory slots (torch tensors in shared memory, allocated before the actors are
forked); an actor fills a free slot and sends only its index; the learner copies the slot to the GPU and sends the index
back.
"""
import os
import queue
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # common.py (a copy beside this file wins)

import multiprocessing as mp

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from common import StepClock, Throttle, nvtx, parse, parser

KEYS = ("obs", "act", "logits", "ret")


def make_rollouts(seed, t, e, frames, size, actions, n=2):
    rng = np.random.default_rng(seed)
    return [{"obs": rng.integers(0, 256, size=(t, e, frames, size, size), dtype=np.uint8),
             "act": rng.integers(0, actions, size=(t, e), dtype=np.int64),
             "logits": rng.standard_normal((t, e, actions), dtype=np.float32),
             "ret": rng.standard_normal((t, e), dtype=np.float32)} for _ in range(n)]


def actor(rank, a, rollout_q, free_q, full_q, slots, stop):
    """One actor: cycles through its rollouts and hands them to the learner. NumPy only (no torch op in the forked
    child: the parent's OpenMP pool does not survive a fork)."""
    pool = make_rollouts(a.seed + 1000 * (rank + 1), a.unroll, a.envs, a.frames, a.size, a.actions)
    i = 0
    while not stop.is_set():
        ro = pool[i % len(pool)]
        i += 1
        if slots is None:
            rollout_q.put(ro)  # pickled by the queue's feeder thread and written through the pipe
        else:
            try:
                k = free_q.get(timeout=0.5)
            except queue.Empty:
                continue
            for key in KEYS:
                slots[key][k][...] = ro[key]  # NumPy views of the shared-memory tensors
            full_q.put(k)


class Policy(nn.Module):
    def __init__(self, frames, actions):
        super().__init__()
        self.conv1 = nn.Conv2d(frames, 32, 8, 4)
        self.conv2 = nn.Conv2d(32, 64, 4, 2)
        self.conv3 = nn.Conv2d(64, 64, 3, 1)
        self.fc = nn.Linear(64 * 7 * 7, 512)
        self.pi = nn.Linear(512, actions)
        self.v = nn.Linear(512, 1)

    def forward(self, obs):
        x = obs.float() / 255.0
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.conv3(x))
        h = F.relu(self.fc(x.flatten(1)))
        return self.pi(h), self.v(h).squeeze(-1)


def main():
    p = parser(__doc__, steps=14)
    p.add_argument("--unroll", type=int, default=32, help="steps per rollout")
    p.add_argument("--envs", type=int, default=32, help="environments per rollout")
    p.add_argument("--frames", type=int, default=4)
    p.add_argument("--size", type=int, default=84)
    p.add_argument("--actions", type=int, default=18)
    p.add_argument("--actors", type=int, default=2)
    p.add_argument("--queue", type=int, default=4, help="rollouts in flight (queue size / shared slots)")
    p.add_argument("--fixed", action="store_true", help="shared-memory slots, only indices through the queue")
    a = parse(p)

    # the actors are forked before CUDA is initialized in this process
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    rollout_q = free_q = full_q = slots = slot_views = None
    if a.fixed:
        shapes = {"obs": ((a.unroll, a.envs, a.frames, a.size, a.size), torch.uint8),
                  "act": ((a.unroll, a.envs), torch.int64),
                  "logits": ((a.unroll, a.envs, a.actions), torch.float32),
                  "ret": ((a.unroll, a.envs), torch.float32)}
        slots = {k: torch.zeros((a.queue,) + s, dtype=dt).share_memory_() for k, (s, dt) in shapes.items()}
        slot_views = {k: v.numpy() for k, v in slots.items()}  # the same shared memory, for the actors
        free_q, full_q = ctx.Queue(), ctx.Queue()
        for k in range(a.queue):
            free_q.put(k)
    else:
        rollout_q = ctx.Queue(maxsize=a.queue)
    procs = [ctx.Process(target=actor, args=(r, a, rollout_q, free_q, full_q, slot_views, stop), daemon=True)
             for r in range(a.actors)]
    for pr in procs:
        pr.start()

    torch.manual_seed(a.seed)
    model = Policy(a.frames, a.actions).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=6e-4, eps=1e-5, fused=True)
    n = a.unroll * a.envs
    losses = torch.zeros(a.steps, device="cuda")
    torch.cuda.synchronize()
    mb = a.unroll * a.envs * a.frames * a.size * a.size / 1e6
    print(f"learner: {a.actors} actors, rollouts of {a.unroll} x {a.envs} ({mb:.1f} MB of frames) "
          f"{'in shared-memory slots' if a.fixed else 'through a multiprocessing.Queue'}", flush=True)

    throttle, clock = Throttle(1), StepClock(a)
    for step in range(a.steps):
        clock.at(step)
        with nvtx(f"step_{step}"):
            with nvtx("rollout"):
                if a.fixed:
                    k = full_q.get()
                    batch = {key: slots[key][k].to("cuda", non_blocking=True) for key in KEYS}  # pageable: staged
                    free_q.put(k)  # the pageable copies have been staged by now: the slot can be refilled
                else:
                    ro = rollout_q.get()  # unpickled here, on the learner's main thread
                    batch = {key: torch.from_numpy(ro[key]).to("cuda", non_blocking=True) for key in KEYS}
            with nvtx("forward"):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    logits, value = model(batch["obs"].view(n, a.frames, a.size, a.size))
                logp = F.log_softmax(logits.float(), dim=-1)
                act = batch["act"].view(n, 1)
                logp_a = logp.gather(1, act).squeeze(1)
                with torch.no_grad():
                    blogp_a = F.log_softmax(batch["logits"].view(n, -1), dim=-1).gather(1, act).squeeze(1)
                    rho = (logp_a - blogp_a).exp().clamp(max=1.0)
                adv = batch["ret"].view(n) - value.float()
                pg = -(rho * logp_a * adv.detach()).mean()
                vloss = 0.5 * adv.pow(2).mean()
                ent = -(logp.exp() * logp).sum(-1).mean()
                loss = pg + 0.5 * vloss - 0.01 * ent
            with nvtx("backward"):
                loss.backward()
            with nvtx("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            losses[step] = loss.detach()
            throttle.step_done()
    clock.end()
    print("loss first/last", float(losses[0]), float(losses[-1]))
    stop.set()
    if free_q is not None:
        free_q.cancel_join_thread()  # do not wait at exit for index puts nobody will read
    for pr in procs:
        pr.terminate()
    for pr in procs:
        pr.join(timeout=5)


if __name__ == "__main__":
    main()
