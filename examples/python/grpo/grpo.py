"""GRPO as SkyRL and DeepSeekMath define it, and sampling with temperature and top-p.

    advantage  A_i = (r_i - mean(group)) / (std(group) + eps), per sample, over its tokens
    ratio      rho_t = exp(logp_t - logp_old_t)
    policy     L_pg = -min(rho_t A, clip(rho_t, 1 - eps_low, 1 + eps_high) A)
    KL (k3)    exp(logp_ref - logp) - (logp_ref - logp) - 1
    loss       token mean of L_pg + kl_coef * k3 over the batch's response tokens
"""

import torch

from task import EOS, PAD


@torch.no_grad()
def sample(policy, prompts, max_new_tokens, temperature, top_p, generator):
    """prompts: [B, P] int64 (same length). Returns (sequences [B, P + N], valid [B, P + N],
    mask [B, N]: 1 on response tokens up to and including EOS)."""
    b = prompts.shape[0]
    seq = prompts
    valid = torch.ones_like(prompts, dtype=torch.bool)
    alive = torch.ones(b, dtype=torch.bool)
    mask = []
    for _ in range(max_new_tokens):
        logits = policy(seq, valid)[:, -1] / max(temperature, 1e-6)
        probs = logits.softmax(-1)
        if top_p < 1.0:
            sorted_p, order = probs.sort(-1, descending=True)
            keep = sorted_p.cumsum(-1) - sorted_p < top_p  # the smallest prefix reaching top_p
            sorted_p = sorted_p * keep
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        token = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        token = torch.where(alive, token, torch.full_like(token, PAD))
        mask.append(alive.clone())
        seq = torch.cat([seq, token[:, None]], 1)
        valid = torch.cat([valid, alive[:, None]], 1)
        alive = alive & (token != EOS)
        if not alive.any():
            break
    return seq, valid, torch.stack(mask, 1).float()


def token_logprobs(policy, seq, valid, prompt_len, temperature):
    """Log-probabilities of the response tokens [B, N] under `policy`."""
    logits = policy(seq, valid)[:, prompt_len - 1:-1] / max(temperature, 1e-6)
    return logits.log_softmax(-1).gather(-1, seq[:, prompt_len:, None]).squeeze(-1)


def group_advantages(rewards, group_size, eps=1e-6):
    r = rewards.view(-1, group_size)
    std = r.std(dim=1, keepdim=True)
    return ((r - r.mean(dim=1, keepdim=True)) / (std + eps)).view(-1)


def grpo_loss(logp, old_logp, ref_logp, adv, mask, clip_low, clip_high, kl_coef):
    ratio = (logp - old_logp).exp()
    a = adv[:, None]
    unclipped, clipped = ratio * a, ratio.clamp(1 - clip_low, 1 + clip_high) * a
    pg = -torch.min(unclipped, clipped)
    diff = ref_logp - logp
    k3 = diff.exp() - diff - 1
    tokens = mask.sum().clamp(min=1)
    loss = ((pg + kl_coef * k3) * mask).sum() / tokens
    stats = {"policy_loss": float((pg * mask).sum() / tokens), "kl": float((k3 * mask).sum() / tokens),
             "clip_fraction": float(((clipped < unclipped).float() * mask).sum() / tokens)}
    return loss, stats
