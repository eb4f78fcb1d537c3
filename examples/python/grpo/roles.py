"""The job's actors: trainer ranks (policy, AdamW, the GRPO update; data-parallel ranks average
gradients over torch.distributed gloo), generator engines (sampling; weights kept current by
skyrl_runtime.weight_sync; sleep / wake_up when colocated with the trainer), the frozen
reference model, and the reward function (a task)."""

import os
import socket

import torch

import grpo
import skyrl_runtime as ray
from policy import Config, Policy
from skyrl_runtime import weight_sync as ws
from task import decode_response, reward


def _one_thread():
    # One thread per actor: on a small machine the actors already share the cores.
    torch.set_num_threads(1)


@ray.remote
class Trainer:
    def __init__(self, config, seed, hp, plan, rank, world, group):
        _one_thread()
        self.hp, self.rank, self.world = hp, rank, world
        self.policy = Policy(Config(**config), seed)
        # The trainer's parameters move once into the sync's shard buffer; every sync then
        # reads them in place (the optimizer below updates them there).
        self.sender = ws.WeightSender(plan, rank, self.policy, group=group)
        self.opt = torch.optim.AdamW(self.policy.parameters(), lr=hp["lr"], betas=(0.9, 0.99),
                                     weight_decay=hp["weight_decay"])

    def address(self):
        """A free port on this node, for the gloo group's rank 0."""
        with socket.socket() as s:
            s.bind(("", 0))
            host = os.environ.get("SKYRL_NODE_HOST") or "127.0.0.1"
            return f"{host}:{s.getsockname()[1]}"

    def join(self, address):
        if self.world > 1:
            torch.distributed.init_process_group("gloo", init_method=f"tcp://{address}", rank=self.rank,
                                                 world_size=self.world)
        return self.rank

    def train(self, batch):
        """update_epochs passes of mini_batches AdamW steps over this rank's part of the batch."""
        hp = self.hp
        seq, valid, mask = batch["sequences"], batch["valid"], batch["mask"]
        adv, ref, plen = batch["advantages"], batch["ref_logprobs"], batch["prompt_len"]
        with torch.no_grad():
            old = grpo.token_logprobs(self.policy, seq, valid, plen, hp["temperature"])
        n = seq.shape[0]
        per = max(1, n // hp["mini_batches"])
        totals = {"loss": 0.0, "policy_loss": 0.0, "kl": 0.0, "clip_fraction": 0.0, "grad_norm": 0.0}
        steps = 0
        for _ in range(hp["update_epochs"]):
            for i in range(0, n, per):
                s = slice(i, i + per)
                logp = grpo.token_logprobs(self.policy, seq[s], valid[s], plen, hp["temperature"])
                loss, stats = grpo.grpo_loss(logp, old[s], ref[s], adv[s], mask[s], hp["clip_low"],
                                             hp["clip_high"], hp["kl_coef"])
                self.opt.zero_grad()
                loss.backward()
                if self.world > 1:
                    for p in self.policy.parameters():
                        torch.distributed.all_reduce(p.grad)
                        p.grad /= self.world
                norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), hp["max_grad_norm"])
                self.opt.step()
                stats.update(loss=float(loss), grad_norm=float(norm))
                for k in totals:
                    totals[k] += stats[k]
                steps += 1
        return {k: v / steps for k, v in totals.items()}

    def send(self, version):
        self.sender.send(version)
        return self.sender.wire_bytes


@ray.remote
class Generator:
    def __init__(self, config, plan, rank, group):
        _one_thread()
        self.policy = Policy(Config(**config))  # weights arrive by weight sync
        self.policy.requires_grad_(False)
        self.receiver = ws.WeightReceiver(plan, rank, self.policy, bind=True, group=group)
        self.receiver.init()
        self.asleep = False

    def update_weights(self, version):
        """The new version straight into the engine's parameters (no copy: they are re-pointed
        at the received bytes)."""
        self.receiver.update(version)
        return self.receiver.version

    def generate(self, prompts, sampling, seed):
        if self.asleep:
            raise RuntimeError("generate: the engine is asleep (call wake_up first)")
        g = torch.Generator().manual_seed(seed)
        seq, valid, mask = grpo.sample(self.policy, prompts, sampling["max_new_tokens"], sampling["temperature"],
                                       sampling["top_p"], g)
        return {"sequences": seq, "valid": valid, "mask": mask, "version": self.receiver.version}

    def sleep(self):
        """Colocated with the trainer: give the device to training until wake_up (vLLM's sleep
        frees the KV cache and, at level 2, the weights; this engine has no KV cache)."""
        self.asleep = True

    def wake_up(self):
        self.asleep = False


@ray.remote
class Reference:
    def __init__(self, config, seed):
        _one_thread()
        self.policy = Policy(Config(**config), seed)  # the initial policy, frozen
        self.policy.requires_grad_(False)

    def logprobs(self, sequences, valid, prompt_len, temperature):
        with torch.no_grad():
            return grpo.token_logprobs(self.policy, sequences, valid, prompt_len, temperature)


@ray.remote(num_cpus=0.25)
def score(targets, responses):
    """The reward function: one reward per response (token ids after the prompt)."""
    out = []
    for target, ids in zip(targets, responses):
        answer, terminated = decode_response(ids)
        out.append(reward(target, answer, terminated))
    return out
