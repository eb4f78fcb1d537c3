"""The policy: a small decoder-only transformer in torch (pre-norm, RMSNorm, fused QKV and
gate/up projections, SwiGLU, learned positions), named as Hugging Face checkpoints name theirs,
and the weight-sync rules that say how each parameter splits across tensor-parallel ranks."""

import math

import torch
from torch import nn

from skyrl_runtime import weight_sync as ws


class Config:
    def __init__(self, vocab=18, d_model=64, layers=2, heads=4, max_len=16, mlp_hidden=128, init_std=0.02):
        self.vocab, self.d_model, self.layers, self.heads = vocab, d_model, layers, heads
        self.max_len, self.mlp_hidden, self.init_std = max_len, mlp_hidden, init_std


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.head_dim = c.heads, c.d_model // c.heads
        self.qkv_proj = nn.Linear(c.d_model, 3 * c.d_model, bias=False)
        self.o_proj = nn.Linear(c.d_model, c.d_model, bias=False)

    def forward(self, x, mask):
        b, t, d = x.shape
        q, k, v = self.qkv_proj(x).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, self.head_dim).transpose(1, 2) for y in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~mask[:, None], -1e9)  # -1e9, not -inf: padding rows stay finite
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        return self.o_proj(out)


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_up_proj = nn.Linear(c.d_model, 2 * c.mlp_hidden, bias=False)
        self.down_proj = nn.Linear(c.mlp_hidden, c.d_model, bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(nn.functional.silu(gate) * up)


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.d_model)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.d_model)
        self.mlp = Mlp(c)

    def forward(self, x, mask):
        x = x + self.self_attn(self.input_layernorm(x), mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab, c.d_model)
        self.embed_positions = nn.Embedding(c.max_len, c.d_model)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.d_model)


class Policy(nn.Module):
    """logits = forward(tokens [B, T], valid [B, T]); positions count real tokens, so left
    padding is free."""

    def __init__(self, c, seed=None):
        super().__init__()
        self.config = c
        self.model = Body(c)
        self.lm_head = nn.Linear(c.d_model, c.vocab, bias=False)
        if seed is not None:
            self.reset(seed)

    def reset(self, seed):
        """Normal(0, init_std) matrices, init_std / sqrt(2 * layers) for the residual outputs,
        ones for norms: the same weights in every process for one seed."""
        g = torch.Generator().manual_seed(seed)
        std = self.config.init_std
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("layernorm.weight") or name == "model.norm.weight":
                    p.fill_(1.0)
                else:
                    s = std / math.sqrt(2 * self.config.layers) if name.endswith(("o_proj.weight", "down_proj.weight")) \
                        else std
                    p.copy_(torch.randn(p.shape, generator=g) * s)

    def forward(self, tokens, valid):
        t = tokens.shape[1]
        positions = (valid.long().cumsum(1) - 1).clamp(min=0)
        x = self.model.embed_tokens(tokens) + self.model.embed_positions(positions)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        mask = causal[None] & valid[:, None, :]
        for layer in self.model.layers:
            x = layer(x, mask)
        return self.lm_head(self.model.norm(x))


def sync_rules(c):
    """How a tensor-parallel engine (vLLM's layout) splits each parameter: fused QKV and gate/up
    column-parallel per block, o_proj and down_proj row-parallel, the rest replicated."""
    d, f, head_dim = c.d_model, c.mlp_hidden, c.d_model // c.heads
    return [ws.Rule("*.qkv_proj.weight", "column", fused=[d, d, d], head_rows=[head_dim] * 3),
            ws.Rule("*.o_proj.weight", "row"),
            ws.Rule("*.gate_up_proj.weight", "column", fused=[f, f]),
            ws.Rule("*.down_proj.weight", "row")]


def sync_spec(c):
    """The weight-sync description of the full model (shapes and dtypes; this one is small
    enough to build, a large one would be built on the "meta" device)."""
    return ws.ModelSpec.from_named_parameters(Policy(c), sync_rules(c))
