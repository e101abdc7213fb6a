"""Inference decode loop with planted problems (default) or fixed (--fixed).

A small GPT (12 layers, d=1024, bf16, static KV cache) generates tokens for batch 1. NVTX:
`request_N` > `prefill`, then one `token_N` range per generated token.

Planted (default):
  1. eager decode, no CUDA graphs: ~200 tiny kernels launched per token, the GPU waits on launches;
  2. a host sync per token: the next token id is read with `.item()` (the GPU drains each token);
  3. a pageable device-to-host copy per token: the logits are copied to a new (pageable) CPU tensor;
  4. allocator churn: a 64 MB scratch mask per token and `torch.cuda.empty_cache()` every token, so
     the mask is cudaMalloc'ed and cudaFree'd (an implicit device sync) every token;
  5. one long CPU stall (250 ms of host work inside one token of the second request).
Fixed (--fixed): the decode step is captured once in a CUDA graph (argmax and the token/position
update inside it), and so is the prefill of the (fixed-length) prompt: eager, its ~200 launches of
tiny kernels would leave the GPU waiting on the CPU; generated ids stay on the GPU and are copied once
per request into pinned memory, no empty_cache, no stall.
"""
import argparse
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--fixed", action="store_true")
p.add_argument("--requests", type=int, default=3)
p.add_argument("--prompt", type=int, default=64)
p.add_argument("--tokens", type=int, default=96)
a = p.parse_args()

VOCAB, D, LAYERS, HEADS, TMAX = 32000, 1024, 12, 16, 512
dev = "cuda"


def nvtx_push(name):
    torch.cuda.nvtx.range_push(name)


def nvtx_pop():
    torch.cuda.nvtx.range_pop()


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
        self.fc1, self.fc2 = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

    def forward(self, x, kc, vc, pos, mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, d // HEADS).permute(2, 0, 3, 1, 4)
        kc.index_copy_(2, pos, k)
        vc.index_copy_(2, pos, v)
        att = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.pe = nn.Embedding(VOCAB, D), nn.Embedding(TMAX, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.lnf, self.head = nn.LayerNorm(D), nn.Linear(D, VOCAB, bias=False)
        self.register_buffer("ar", torch.arange(TMAX))

    def forward(self, tok, pos, caches):
        x = self.emb(tok) + self.pe(pos)[None]
        mask = (self.ar[None, :] <= pos[:, None])[None, None]
        for blk, (kc, vc) in zip(self.blocks, caches):
            x = blk(x, kc, vc, pos, mask)
        return self.head(self.lnf(x[:, -1]))


torch.manual_seed(0)
model = GPT().to(dev, torch.bfloat16).eval()
caches = [
    (torch.zeros(1, HEADS, TMAX, D // HEADS, device=dev, dtype=torch.bfloat16),
     torch.zeros(1, HEADS, TMAX, D // HEADS, device=dev, dtype=torch.bfloat16))
    for _ in range(LAYERS)
]
prompts = torch.randint(0, VOCAB, (a.requests, 1, a.prompt), device=dev)
torch.cuda.synchronize()

with torch.inference_mode():
    if a.fixed:
        static_tok = torch.zeros(1, 1, dtype=torch.long, device=dev)
        static_pos = torch.zeros(1, dtype=torch.long, device=dev)
        generated = torch.zeros(1, TMAX + 1, dtype=torch.long, device=dev)
        static_prompt = torch.zeros(1, a.prompt, dtype=torch.long, device=dev)
        prompt_pos = torch.arange(a.prompt, device=dev)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                model(static_prompt, prompt_pos, caches)
                model(static_tok, static_pos, caches)
        torch.cuda.current_stream().wait_stream(side)
        prefill_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(prefill_graph):
            static_tok.copy_(model(static_prompt, prompt_pos, caches).argmax(-1, keepdim=True))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            nxt = model(static_tok, static_pos, caches).argmax(-1, keepdim=True)
            generated.index_copy_(1, static_pos + 1, nxt)
            static_tok.copy_(nxt)
            static_pos.add_(1)
        out_host = torch.zeros(1, TMAX + 1, dtype=torch.long).pin_memory()
        torch.cuda.synchronize()

    for r in range(a.requests):
        nvtx_push(f"request_{r}")
        nvtx_push("prefill")
        if a.fixed:
            static_prompt.copy_(prompts[r])
            prefill_graph.replay()
        else:
            pos = torch.arange(a.prompt, device=dev)
            logits = model(prompts[r], pos, caches)
        nvtx_pop()
        if a.fixed:
            static_pos.fill_(a.prompt)
            for t in range(a.tokens):
                nvtx_push(f"token_{t}")
                graph.replay()
                nvtx_pop()
            out_host.copy_(generated, non_blocking=True)
            torch.cuda.current_stream().synchronize()
        else:
            tok = int(logits.argmax(-1).item())
            for t in range(a.tokens):
                nvtx_push(f"token_{t}")
                p_t = torch.tensor([a.prompt + t], device=dev)
                logits = model(torch.tensor([[tok]], device=dev), p_t, caches)
                # a naive repetition penalty: a dense (context x vocab) fp32 mask built per token (64 MB),
                # which with empty_cache() below is cudaMalloc'ed and cudaFree'd every token
                seen = torch.zeros(TMAX, VOCAB, device=dev)
                seen[: a.prompt + t, tok] = 1.0
                logits = logits - 0.1 * seen.amax(0)
                probs = logits.float().softmax(-1).cpu()  # pageable D2H copy every token (kept for logging)
                tok = int(logits.argmax(-1).item())  # host sync every token
                torch.cuda.empty_cache()  # allocator churn
                if r == 1 and t == a.tokens // 2:
                    time.sleep(0.25)  # one long CPU stall (e.g. a slow detokenizer or logging call)
                nvtx_pop()
        nvtx_pop()
torch.cuda.synchronize()
print("done", "fixed" if a.fixed else "planted")
