"""GRPO on the copy task, written against skyrl_runtime as a SkyRL user writes against Ray.

    python3 main.py                      # no cluster: init() starts a local one
    skyrl job submit --working-dir examples/python/grpo -- python3 main.py

Trainer actors (torch policy, AdamW, GRPO loss), generator engines (temperature / top-p
sampling), a reference model and a reward function (a task), placed in a placement group with
colocate_all (trainer and engine share a bundle, half a GPU each where there are GPUs; engines
sleep while the trainer trains) or apart (--no-colocate). After every step the trainer ranks
send the new weights to the engines with skyrl_runtime.weight_sync. One progress line per step;
metrics.jsonl and reward.svg in --output-dir.
"""

import argparse
import json
import os
import sys
import time

import torch

import skyrl_runtime as ray
from skyrl_runtime import weight_sync as ws
from skyrl_runtime.util.placement_group import placement_group, remove_placement_group
from skyrl_runtime.util.scheduling_strategies import PlacementGroupSchedulingStrategy

import grpo
import roles
from policy import Config, sync_spec
from task import VOCAB, encode_prompt, make_examples, new_rng

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv):
    a = argparse.ArgumentParser(description="GRPO on the copy task with skyrl_runtime")
    a.add_argument("--steps", type=int, default=150, help="at most this many steps")
    a.add_argument("--target", type=float, default=0.9, help="mean reward to reach")
    a.add_argument("--stop-after-target", type=int, default=3,
                   help="stop after this many steps in a row at the target (0: run every step)")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--prompts", type=int, default=16, help="prompts per step")
    a.add_argument("--group-size", type=int, default=8, help="samples per prompt")
    a.add_argument("--trainers", type=int, default=1, help="data-parallel trainer ranks")
    a.add_argument("--engines", type=int, default=1)
    a.add_argument("--no-colocate", dest="colocate", action="store_false",
                   help="trainer and engines in bundles of their own")
    a.add_argument("--temperature", type=float, default=1.0)
    a.add_argument("--top-p", type=float, default=1.0)
    a.add_argument("--output-dir", default="skyrl-grpo-py-out")
    args = a.parse_args(argv)
    for name in ("steps", "prompts", "group_size", "trainers", "engines"):
        if getattr(args, name) < 1:
            a.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.prompts * args.group_size % args.trainers or args.prompts % args.engines:
        a.error("--prompts must split evenly over --engines, and prompts x group size over --trainers")
    if not 0 < args.top_p <= 1:
        a.error("--top-p must be in (0, 1]")
    return args


MODEL = dict(vocab=VOCAB, d_model=64, layers=2, heads=4, max_len=16, mlp_hidden=128)
HP = dict(lr=1e-3, weight_decay=0.0, clip_low=0.2, clip_high=0.2, kl_coef=0.001, max_grad_norm=1.0,
          update_epochs=2, mini_batches=4)


def place(args):
    """The placement group and, per role, its scheduling strategy and resources."""
    gpus = ray.cluster_resources().get("GPU", 0) >= max(args.trainers, args.engines)
    share = {"num_cpus": 0.25, "num_gpus": 0.5 if gpus else 0}
    # A bundle holds one trainer rank and one engine when colocated, one of either otherwise.
    unit = {"CPU": 0.5 if args.colocate else 0.25, **({"GPU": 1} if gpus else {})}
    if args.colocate:
        # colocate_all: trainer rank i and engine i share bundle i (half a GPU each).
        bundles = [dict(unit) for _ in range(max(args.trainers, args.engines))]
        trainer_bundle = list(range(args.trainers))
        engine_bundle = list(range(args.engines))
    else:
        bundles = [dict(unit) for _ in range(args.trainers + args.engines)]
        trainer_bundle = list(range(args.trainers))
        engine_bundle = [args.trainers + e for e in range(args.engines)]
    bundles[0]["CPU"] += 0.25  # the reference model, beside trainer rank 0
    pg = placement_group(bundles, strategy="PACK")
    ray.get(pg.ready(), timeout=120)

    def at(i, resources=share):
        return dict(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
                    **resources)

    return pg, [at(i) for i in trainer_bundle], [at(i) for i in engine_bundle], at(0, {"num_cpus": 0.25})


def sync(trainers, engines, version):
    """Trainer ranks send, engine ranks receive, all at once; returns (seconds, bytes)."""
    t0 = time.monotonic()
    refs = [e.update_weights.remote(version) for e in engines] + [t.send.remote(version) for t in trainers]
    out = ray.get(refs)
    return time.monotonic() - t0, sum(out[len(engines):])


def reward_svg(history, target, title):
    """Mean reward (and exact-match share) against step, 0..1, dashed target line."""
    w, h, left, right, top, bottom = 640, 360, 50, 20, 30, 40
    n = max(len(history), 2)

    def xy(i, v):
        return left + (w - left - right) * i / (n - 1), top + (h - top - bottom) * (1 - v)

    def line(key, colour):
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(i, m[key]) for i, m in enumerate(history)))
        return f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{pts}"/>'

    ty = xy(0, target)[1]
    ticks = "".join(f'<text x="{left - 8}" y="{xy(0, v)[1] + 4:.1f}" text-anchor="end" font-size="11">{v:.1f}</text>'
                    for v in (0, 0.25, 0.5, 0.75, 1.0))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif">'
            f'<rect width="100%" height="100%" fill="white"/>'
            f'<text x="{w / 2}" y="18" text-anchor="middle" font-size="14">{title}</text>{ticks}'
            f'<line x1="{left}" y1="{ty:.1f}" x2="{w - right}" y2="{ty:.1f}" stroke="grey" stroke-dasharray="5,4"/>'
            f'{line("mean_reward", "#1f77b4")}{line("exact_fraction", "#2ca02c")}'
            f'<text x="{w / 2}" y="{h - 8}" text-anchor="middle" font-size="11">step (1..{len(history)}); '
            f'blue: mean reward, green: exact share</text></svg>')


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(1)
    if os.environ.get("SKYRL_JOB_ID"):
        ray.init()  # a job: its --working-dir is already every actor's
    else:
        ray.init(runtime_env={"working_dir": HERE})  # the actors import this folder's modules
    os.makedirs(args.output_dir, exist_ok=True)

    config = Config(**MODEL)
    plan = ws.SyncPlan(sync_spec(config), trainer=ws.ModelParallel(replicas=args.trainers),
                       engines=[ws.ModelParallel(tp=1)] * args.engines)
    group = f"grpo-{os.getpid()}-{time.time_ns()}"
    hp = dict(HP, temperature=args.temperature)
    sampling = dict(max_new_tokens=6, temperature=args.temperature, top_p=args.top_p)
    t_setup = time.monotonic()
    pg, trainer_opts, engine_opts, reference_opts = place(args)
    trainers = [roles.Trainer.options(**trainer_opts[r]).remote(MODEL, args.seed, hp, plan, r, args.trainers, group)
                for r in range(args.trainers)]
    engines = [roles.Generator.options(**engine_opts[e]).remote(MODEL, plan, e, group) for e in range(args.engines)]
    reference = roles.Reference.options(**reference_opts).remote(MODEL, args.seed)
    if args.trainers > 1:
        address = ray.get(trainers[0].address.remote())
        ray.get([t.join.remote(address) for t in trainers])
    sync(trainers, engines, 1)  # the initial weights: version 1
    print(f"set-up {time.monotonic() - t_setup:.1f}s: {args.trainers} trainer rank(s), {args.engines} engine(s), "
          f"{'colocated' if args.colocate else 'apart'}; weight sync moves {plan.summary()['bytes']} bytes per step",
          flush=True)

    rng = new_rng(args.seed)
    history, at_target, reached = [], 0, None
    start = time.monotonic()
    for step in range(1, args.steps + 1):
        t0, wall0 = time.monotonic(), time.time()
        examples = make_examples(rng, args.prompts)
        per_engine = args.prompts // args.engines
        gen = []
        for e, engine in enumerate(engines):
            mine = examples[e * per_engine:(e + 1) * per_engine]
            prompts = torch.tensor([encode_prompt(p) for p, _ in mine for _ in range(args.group_size)])
            gen.append(engine.generate.remote(prompts, sampling, args.seed * 100_003 + step * 101 + e))
        rollouts = ray.get(gen)
        t_gen = time.monotonic()
        if args.colocate:
            ray.get([e.sleep.remote() for e in engines])
        plen = len(encode_prompt(examples[0][0]))
        width = max(r["sequences"].shape[1] for r in rollouts)

        def pad(t, value):
            return torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)

        seq = torch.cat([pad(r["sequences"], 0) for r in rollouts])
        valid = torch.cat([pad(r["valid"], False) for r in rollouts])
        mask = torch.cat([torch.nn.functional.pad(r["mask"], (0, width - r["sequences"].shape[1])) for r in rollouts])
        targets = [t for _, t in examples for _ in range(args.group_size)]
        responses = [row[:n] for row, n in zip(seq[:, plen:].tolist(), mask.sum(1).long().tolist())]
        rewards = torch.tensor(ray.get(roles.score.remote(targets, responses)))
        t_reward = time.monotonic()
        ref = ray.get(reference.logprobs.remote(seq, valid, plen, args.temperature))
        t_ref = time.monotonic()
        adv = grpo.group_advantages(rewards, args.group_size)
        per_rank = seq.shape[0] // args.trainers
        parts = [{"sequences": seq[s], "valid": valid[s], "mask": mask[s], "advantages": adv[s],
                  "ref_logprobs": ref[s], "prompt_len": plen}
                 for s in (slice(r * per_rank, (r + 1) * per_rank) for r in range(args.trainers))]
        stats = ray.get([t.train.remote(p) for t, p in zip(trainers, parts)])
        t_train = time.monotonic()
        if args.colocate:
            ray.get([e.wake_up.remote() for e in engines])
        sync_s, sync_bytes = sync(trainers, engines, step + 1)
        t_end = time.monotonic()

        tokens = int(mask.sum())
        m = {"step": step, "mean_reward": float(rewards.mean()), "exact_fraction": float((rewards == 1).float().mean()),
             **{k: sum(s[k] for s in stats) / len(stats) for k in stats[0]},
             "response_tokens": tokens, "tokens_per_s": tokens / (t_end - t0),
             "generate_s": t_gen - t0, "reward_s": t_reward - t_gen, "reference_s": t_ref - t_reward,
             "train_s": t_train - t_ref, "sync_s": sync_s, "sync_bytes": sync_bytes,
             "sync_gbps": sync_bytes / sync_s / 1e9 if sync_s else 0.0, "weight_version": rollouts[0]["version"],
             "step_s": t_end - t0, "elapsed_s": t_end - start}
        history.append(m)
        # As a job, the step goes to the head too: the dashboard's plots, `skyrl timeline`, metrics.
        def at(t):
            return wall0 + (t - t0)

        ray.report_step(step, m, start=wall0, phases={
            "generate": (at(t0), at(t_gen)), "reward": (at(t_gen), at(t_reward)),
            "reference": (at(t_reward), at(t_ref)), "train": (at(t_ref), at(t_train)),
            "sync": (at(t_end - sync_s), at(t_end))})
        print(f"step {step:4d}  reward {m['mean_reward']:.3f}  exact {m['exact_fraction']:.2f}  kl {m['kl']:.4f}  "
              f"loss {m['loss']:+.4f}  grad {m['grad_norm']:.3f}  tok/s {m['tokens_per_s']:.0f}  "
              f"gen {m['generate_s']:.2f}s  train {m['train_s']:.2f}s  sync {m['sync_s']:.3f}s  "
              f"elapsed {m['elapsed_s']:.1f}s", flush=True)
        with open(os.path.join(args.output_dir, "metrics.jsonl"), "a" if step > 1 else "w") as f:
            f.write(json.dumps(m) + "\n")
        if m["mean_reward"] >= args.target:
            reached = reached or (step, m["elapsed_s"])
            at_target += 1
            if args.stop_after_target and at_target >= args.stop_after_target:
                break
        else:
            at_target = 0

    with open(os.path.join(args.output_dir, "reward.svg"), "w") as f:
        f.write(reward_svg(history, args.target, f"GRPO copy task (Python), seed {args.seed}"))
    remove_placement_group(pg)
    if reached:
        print(f"reached mean reward {args.target} at step {reached[0]} after {reached[1]:.1f}s; "
              f"outputs in {args.output_dir}/ (metrics.jsonl, reward.svg)", flush=True)
        return 0
    print(f"did not reach mean reward {args.target} in {len(history)} steps; outputs in {args.output_dir}/",
          flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
