"""skyrl_runtime.weight_sync: trainer ranks and engine ranks, each its own actor process on a real
local cluster (meeting through the head's KV), moving torch tensors along the C++ planner's plan.
Every engine tensor is checked byte for byte against the slice cut here, in torch, from the full
model of that version: an implementation of TP sharding independent of the C++ one."""

import os
import signal
import sys
import threading

import cloudpickle
import pytest
import torch

import skyrl_runtime as ray
from skyrl_runtime import weight_sync as ws

H, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB, LAYERS, LORA_RANK = 64, 4, 2, 16, 128, 256, 2, 8
Q, KV = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM

# The actors below use this module's helpers; their processes cannot import a test module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

RULES = [
    ws.Rule("*.qkv_proj.weight", "column", fused=[Q, KV, KV], head_rows=[HEAD_DIM] * 3),
    ws.Rule("*.o_proj.weight", "row"),
    ws.Rule("*.gate_up_proj.weight", "column", fused=[INTER, INTER]),
    ws.Rule("*.down_proj.weight", "row"),
    ws.Rule("*embed_tokens.weight", "column"),
    ws.Rule("lm_head.weight", "column"),
    ws.Rule("*.o_proj.lora_A.weight", "row"),  # the base is row-parallel: A splits its input
]


def full_shapes(lora=False):
    """A small Qwen-like model, in sync order: (name, full shape)."""
    out = [("model.embed_tokens.weight", (VOCAB, H))]
    for layer in range(LAYERS):
        p = f"model.layers.{layer}"
        out += [(f"{p}.input_layernorm.weight", (H,)),
                (f"{p}.self_attn.qkv_proj.weight", (Q + 2 * KV, H)),
                (f"{p}.self_attn.o_proj.weight", (H, Q))]
        if lora:
            out += [(f"{p}.self_attn.o_proj.lora_A.weight", (LORA_RANK, Q)),
                    (f"{p}.self_attn.o_proj.lora_B.weight", (H, LORA_RANK))]
        out += [(f"{p}.mlp.gate_up_proj.weight", (2 * INTER, H)),
                (f"{p}.mlp.down_proj.weight", (H, INTER))]
    out += [("model.norm.weight", (H,)), ("lm_head.weight", (VOCAB, H)), ("mtp.0.proj.weight", (H, 2 * H))]
    return out


def spec_of(dtype=torch.float32, lora=False):
    meta = [(name, torch.empty(shape, dtype=dtype, device="meta")) for name, shape in full_shapes(lora)]
    return ws.ModelSpec.from_named_parameters(meta, RULES)


def full_model(version, dtype=torch.float32, lora=False):
    out = {}
    for i, (name, shape) in enumerate(full_shapes(lora)):
        g = torch.Generator().manual_seed(1000 * version + i)
        out[name] = torch.randn(shape, generator=g).to(dtype)
    return out


def tp_slice(spec, name, full, tp, r):
    """Rank r of tp's piece of `full`: each fused block cut into tp equal parts along the split
    dimension, rank r's parts concatenated (how Megatron and vLLM hold QKV and gate/up)."""
    p = next(p for p in spec.params if p["name"] == name)
    if p["split_dim"] < 0 or tp == 1:
        return full
    blocks = full.split(p["fused"], dim=0) if p["fused"] else [full]
    return torch.cat([b.chunk(tp, dim=p["split_dim"])[r] for b in blocks], dim=p["split_dim"])


def same_bytes(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.uint8) if a.dim() else a,
                                                                     b.view(torch.uint8) if b.dim() else b)


@ray.remote(num_cpus=0.25)
class TrainerRank:
    """A trainer rank: its TP shard of every parameter, updated in place each step (as an
    optimizer does), sent with WeightSender."""

    def __init__(self, plan, rank, tp, group, io_timeout):
        self.plan, self.rank, self.tp = plan, rank, tp
        self.params = {lp.name: torch.zeros(lp.shape, dtype=lp.dtype) for lp in plan.sender_params(rank)}
        self.sender = ws.WeightSender(plan, rank, self.params, group=group, io_timeout=io_timeout)

    def step(self, version):
        full = full_model(version)
        with torch.no_grad():
            for name, t in self.params.items():
                t.copy_(tp_slice(self.plan.spec, name, full[name], self.tp, self.rank % self.tp))

    def send(self, version):
        self.sender.send(version)
        return self.sender.wire_bytes

    def pid(self):
        return os.getpid()


@ray.remote(num_cpus=0.25)
class EngineRank:
    """An engine rank: its own tensors (zeros, or a marker in parameters the sync skips), kept
    current by WeightReceiver."""

    def __init__(self, plan, rank, tp, group, io_timeout):
        self.params = {lp.name: torch.full(lp.shape, 7.0, dtype=lp.dtype) for lp in plan.receiver_params(rank)}
        self.rx = ws.WeightReceiver(plan, rank, self.params, group=group, io_timeout=io_timeout)
        self.rx.init()
        self.tp, self.rank = tp, rank

    def update(self, version):
        self.rx.update(version)
        return self.rx.version

    def version(self):
        return self.rx.version

    def tensors(self):
        return {name: t.clone() for name, t in self.params.items()}


def start(plan, trainer_tp, engine_tps, group, io_timeout=30.0):
    trainers = [TrainerRank.remote(plan, r, trainer_tp, group, io_timeout) for r in range(trainer_tp)]
    engines, rank = [], 0
    for tp in engine_tps:
        engines += [(EngineRank.remote(plan, rank + i, tp, group, io_timeout), tp, i) for i in range(tp)]
        rank += tp
    return trainers, engines


def sync(trainers, engines, version):
    ray.get([t.step.remote(version) for t in trainers])
    refs = [e.update.remote(version) for e, _, _ in engines] + [t.send.remote(version) for t in trainers]
    return ray.get(refs, timeout=120)


def check_engines(spec, engines, version, skipped=()):
    full = full_model(version)
    tensors = ray.get([e.tensors.remote() for e, _, _ in engines])
    for (_, tp, r), held in zip(engines, tensors):
        for name, t in held.items():
            if any(s in name for s in skipped):
                assert torch.all(t == 7.0), f"{name} was synced although the plan skips it"
                continue
            want = tp_slice(spec, name, full[name], tp, r)
            assert same_bytes(t, want), f"engine rank (tp {tp}, index {r}): {name} differs at version {version}"


def test_trainer_tp2_to_engines_tp1_and_tp2_every_byte(cluster):
    spec = spec_of()
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=2),
                       engines=[ws.ModelParallel(tp=1), ws.ModelParallel(tp=2)], exclude=["mtp."])
    assert plan.num_senders == 2 and plan.num_receivers == 3
    assert "mtp.0.proj.weight" not in plan.summary()["synced"]
    trainers, engines = start(plan, 2, [1, 2], "tp2-to-1-2")
    for version in (1, 2, 3):
        out = sync(trainers, engines, version)
        assert out[:3] == [version] * 3
        check_engines(spec, engines, version, skipped=["mtp."])
    # Every byte moved once: the trainer ranks put exactly the engines' synced bytes on the wire.
    synced = set(plan.summary()["synced"])
    engine_bytes = sum(lp.nbytes for r in range(3) for lp in plan.receiver_params(r) if lp.name in synced)
    assert sum(out[3:]) == engine_bytes


def test_a_sender_killed_during_a_sync_leaves_the_previous_version_and_fails_every_side(cluster):
    spec = spec_of()
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=2), engines=[ws.ModelParallel(tp=1)])
    trainers, engines = start(plan, 2, [1], "killed-sender", io_timeout=3.0)
    sync(trainers, engines, 1)
    check_engines(spec, engines, 1)
    # Version 2: the engine and trainer rank 1 are in the sync when trainer rank 0's process
    # is SIGKILLed.
    ray.get([t.step.remote(2) for t in trainers])
    pid = ray.get(trainers[0].pid.remote())
    update = engines[0][0].update.remote(2)
    send = trainers[1].send.remote(2)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ws.WeightSyncError) as engine_error:
        ray.get(update, timeout=60)
    assert "sender(s) 0" in str(engine_error.value), engine_error.value
    assert "version 1 stays live" in str(engine_error.value), engine_error.value
    with pytest.raises(ws.WeightSyncError) as sender_error:
        ray.get(send, timeout=60)
    assert "receiver 0" in str(sender_error.value), sender_error.value
    assert ray.get(engines[0][0].version.remote()) == 1
    check_engines(spec, engines, 1)
    # A replacement rank 0 joins, and the next version goes through.
    trainers[0] = TrainerRank.remote(plan, 0, 2, "killed-sender", 3.0)
    sync(trainers, engines, 3)
    check_engines(spec, engines, 3)


def test_a_receiver_whose_shapes_disagree_is_refused_before_anything_is_written(tmp_path):
    spec = spec_of()
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=2), engines=[ws.ModelParallel(tp=2)])
    mine = {lp.name: torch.full(lp.shape, 7.0) for lp in plan.receiver_params(0)}
    mine["model.layers.1.self_attn.qkv_proj.weight"] = torch.full((Q + 2 * KV, H), 7.0)  # the full, unsplit shape
    with pytest.raises(ValueError, match=r"'model.layers.1.self_attn.qkv_proj.weight' has shape \(128, 64\), "
                                         r"the plan says \(64, 64\)"):
        ws.WeightReceiver(plan, 0, mine, rendezvous=str(tmp_path))
    assert all(torch.all(t == 7.0) for t in mine.values())
    mine.pop("model.norm.weight")
    mine["model.layers.1.self_attn.qkv_proj.weight"] = torch.zeros((Q + 2 * KV) // 2, H)
    with pytest.raises(ValueError, match="no tensor for 'model.norm.weight'"):
        ws.WeightReceiver(plan, 0, mine, rendezvous=str(tmp_path))
    with pytest.raises(ValueError, match="'lm_head.weight' is torch.float16, the plan says torch.float32"):
        ws.WeightSender(plan, 1, {**{lp.name: torch.zeros(lp.shape) for lp in plan.sender_params(1)},
                                  "lm_head.weight": torch.zeros(VOCAB // 2, H, dtype=torch.float16)},
                        rendezvous=str(tmp_path))


def run_in_threads(*fns):
    errors = []

    def run(fn):
        try:
            fn()
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(fn,)) for fn in fns]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def test_pack_keeps_the_trainers_tensors_and_sends_them_in_place(tmp_path):
    spec = spec_of()
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=1), engines=[ws.ModelParallel(tp=1)])
    model = torch.nn.ParameterDict({n.replace(".", "/"): torch.nn.Parameter(t) for n, t in full_model(1).items()})
    params = {n.replace("/", "."): p for n, p in model.items()}
    identities = {n: id(p) for n, p in params.items()}
    before = {n: p.data_ptr() for n, p in params.items()}
    sender = ws.WeightSender(plan, 0, params, rendezvous=str(tmp_path), group="pack")
    assert all(id(p) == identities[n] for n, p in model.items() for n in [n.replace("/", ".")])
    moved = [n for n, p in params.items() if p.data_ptr() != before[n]]
    assert moved == list(params), "packing moves every parameter into the sync's buffer"
    ends = sorted((p.data_ptr(), p.data_ptr() + p.numel() * 4) for p in params.values())
    assert all(a[1] == b[0] for a, b in zip(ends, ends[1:])), "one buffer, in the plan's order, no gaps"
    assert all(same_bytes(params[n], t) for n, t in full_model(1).items())
    # An optimizer step changes the parameters in place; the next send carries the new values.
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    rx = ws.WeightReceiver(plan, 0, group="pack", rendezvous=str(tmp_path))
    rx.init()
    run_in_threads(lambda: rx.update(1), lambda: sender.send(1))
    got = rx.views()
    for name, t in full_model(1).items():
        assert same_bytes(got[name], t - 0.5), name


def test_with_deltas_on_every_version_is_exact_and_one_host_keeps_direct_writes(tmp_path):
    spec = spec_of(torch.bfloat16)
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=1), engines=[ws.ModelParallel(tp=2)])
    model = torch.nn.ParameterDict({n.replace(".", "/"): torch.nn.Parameter(t)
                                    for n, t in full_model(1, torch.bfloat16).items()})
    params = {n.replace("/", "."): p for n, p in model.items()}
    sender = ws.WeightSender(plan, 0, params, rendezvous=str(tmp_path), group="delta", delta=True)
    rxs = [ws.WeightReceiver(plan, r, rendezvous=str(tmp_path), group="delta", delta=True,
                             staging="in_place" if r else "copy") for r in range(2)]
    for rx in rxs:
        rx.init()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def check(rx, r, version):
        got = rx.views()
        for name, t in params.items():
            assert same_bytes(got[name], tp_slice(spec, name, t.detach(), 2, r)), (version, r, name)

    for version in range(1, 5):
        if version > 1:  # a small step: most bf16 words keep every bit
            for p in model.parameters():
                p.grad = torch.randn_like(p)
            opt.step()
        run_in_threads(*[lambda rx=rx: rx.update(version) for rx in rxs], lambda: sender.send(version))
        for r, rx in enumerate(rxs):
            check(rx, r, version)  # (holds no views past the check: in-place staging needs that)
    # On one host the sender writes straight into each receiver's buffer (one copy), which a
    # delta cannot beat: no delta frames. (The TCP path's deltas: tcp_transport_test.cc.)
    assert sender.delta_stats == {"bytes": 0, "wire_bytes": 0, "frames": 0, "raw_frames": 0}
    with pytest.raises(TypeError, match="delta must be True or False"):
        ws.WeightReceiver(plan, 0, rendezvous=str(tmp_path), delta="yes")


def test_lora_only_moves_the_adapters_and_bind_repoints_the_engine(tmp_path):
    spec = spec_of(lora=True)
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=2), engines=[ws.ModelParallel(tp=1)], lora_only=True)
    assert plan.summary()["synced"] == [n for n, _ in full_shapes(lora=True) if "lora_" in n]
    shards = [{lp.name: torch.zeros(lp.shape) for lp in plan.sender_params(r)} for r in range(2)]
    senders = [ws.WeightSender(plan, r, shards[r], rendezvous=str(tmp_path), group="lora") for r in range(2)]
    engine = {lp.name: torch.full(lp.shape, 7.0) for lp in plan.receiver_params(0)}
    rx = ws.WeightReceiver(plan, 0, engine, bind=True, rendezvous=str(tmp_path), group="lora")
    rx.init()
    for version in (1, 2, 3):  # the retired buffer is reused from the third version on
        full = full_model(version, lora=True)
        with torch.no_grad():
            for r in range(2):
                for name, t in shards[r].items():
                    t.copy_(tp_slice(spec, name, full[name], 2, r))
        run_in_threads(lambda v=version: rx.update(v), *[lambda s=s, v=version: s.send(v) for s in senders])
        assert rx.version == version
        live = rx.views()
        for name, t in engine.items():
            assert t.data_ptr() == live[name].data_ptr(), f"{name} does not use the live version's memory"
            if "lora_" in name:
                assert same_bytes(t, full[name]), name
            else:
                assert torch.all(t == 7.0), f"{name}: a base weight changed in a LoRA-only sync"
    with pytest.raises(ValueError, match="in-place staging"):
        ws.WeightReceiver(plan, 0, engine, bind=True, staging="in_place", rendezvous=str(tmp_path))


def test_unpacked_senders_copy_at_each_send_and_packed_ones_refuse_moved_tensors(tmp_path):
    spec = spec_of()
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(), engines=[ws.ModelParallel()])
    mine = {n: t.clone() for n, t in full_model(1).items()}
    where = {n: t.data_ptr() for n, t in mine.items()}
    sender = ws.WeightSender(plan, 0, mine, pack=False, rendezvous=str(tmp_path), group="unpacked")
    assert all(t.data_ptr() == where[n] for n, t in mine.items())  # left where they were
    rx = ws.WeightReceiver(plan, 0, rendezvous=str(tmp_path), group="unpacked", staging="in_place")
    for version in (1, 2):
        with torch.no_grad():
            for name, t in full_model(version).items():
                mine[name].copy_(t)
        run_in_threads(lambda v=version: rx.update(v), lambda v=version: sender.send(v))
        got = rx.views()
        assert all(same_bytes(got[n], t) for n, t in full_model(version).items())
        del got  # in-place staging needs the live version free
    packed = {n: torch.nn.Parameter(t.clone()) for n, t in full_model(1).items()}
    sender = ws.WeightSender(plan, 0, packed, rendezvous=str(tmp_path), group="unpacked")
    packed["lm_head.weight"].data = packed["lm_head.weight"].data.clone()  # moved out of the buffer
    with pytest.raises(ws.WeightSyncError, match="'lm_head.weight' no longer lives in the sync's buffer") as e:
        sender.send(3)
    assert e.value.code == "FAILED_PRECONDITION"
    shared = {n: t.clone() for n, t in full_model(1).items()}
    shared["model.norm.weight"] = shared["model.layers.0.input_layernorm.weight"]
    with pytest.raises(ValueError, match="share memory"):
        ws.WeightSender(plan, 0, shared, rendezvous=str(tmp_path))


def test_an_engine_of_two_ranks_commits_both_or_neither(tmp_path):
    spec = spec_of()
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=1), engines=[ws.ModelParallel(tp=2)])
    engine = [{lp.name: torch.full(lp.shape, 7.0) for lp in plan.receiver_params(r)} for r in range(2)]
    rxs = [ws.WeightReceiver(plan, r, engine[r], rendezvous=str(tmp_path), group="two-ranks") for r in range(2)]
    for v in (1, 2):
        sender = ws.WeightSender(plan, 0, {n: t.clone() for n, t in full_model(v).items()}, rendezvous=str(tmp_path),
                                 group="two-ranks")
        run_in_threads(*[lambda rx=rx, v=v: rx.prepare(v) for rx in rxs], lambda v=v: sender.send(v))
        with pytest.raises(ws.WeightSyncError) as e:
            rxs[0].prepare(v + 1)
        assert e.value.code == "FAILED_PRECONDITION"
        if v == 1:  # one rank's peer failed, say: the engine aborts both, and both keep serving what they had
            for rx in rxs:
                rx.abort()
            assert [rx.version for rx in rxs] == [0, 0]
            assert all(torch.all(t == 7.0) for ranks in engine for t in ranks.values())
        else:
            for rx in rxs:
                rx.commit()
            assert [rx.version for rx in rxs] == [2, 2]
            for r in range(2):
                for name, t in engine[r].items():
                    assert same_bytes(t, tp_slice(spec, name, full_model(2)[name], 2, r)), name
    with pytest.raises(ws.WeightSyncError) as e:
        rxs[1].commit()
    assert e.value.code == "FAILED_PRECONDITION"


E4M3 = None


def e4m3_values():
    """The 256 values of fp8 e4m3 (OCP FN: no infinities, 0x7f/0xff NaN), by byte."""
    global E4M3
    if E4M3 is None:
        vals = []
        for b in range(256):
            sign = -1.0 if b & 0x80 else 1.0
            exp, man = (b >> 3) & 0xF, b & 0x7
            if exp == 0xF and man == 0x7:
                vals.append(float("nan"))
            elif exp == 0:
                vals.append(sign * man / 8 * 2.0 ** -6)
            else:
                vals.append(sign * (1 + man / 8) * 2.0 ** (exp - 7))
        E4M3 = torch.tensor(vals, dtype=torch.float32)
    return E4M3


def test_fp8_rollout_weights_equal_the_whole_model_converted_at_once(tmp_path):
    spec = spec_of(dtype=torch.bfloat16)
    full = full_model(1, dtype=torch.bfloat16)

    def synced(trainer_tp, engine_tp, group):
        plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=trainer_tp), engines=[ws.ModelParallel(tp=engine_tp)],
                           fp8=True, exclude=["mtp."])
        senders = [ws.WeightSender(plan, r, {lp.name: tp_slice(spec, lp.name, full[lp.name], trainer_tp, r).clone()
                                             for lp in plan.sender_params(r)},
                                   rendezvous=str(tmp_path), group=group) for r in range(trainer_tp)]
        rxs = [ws.WeightReceiver(plan, r, rendezvous=str(tmp_path), group=group) for r in range(engine_tp)]
        run_in_threads(*[lambda rx=rx: rx.update(1) for rx in rxs], *[lambda s=s: s.send(1) for s in senders])
        return plan, [rx.views() for rx in rxs]

    whole_plan, (whole,) = synced(1, 1, "fp8-whole")
    assert "model.layers.0.self_attn.qkv_proj.weight.mx_scale" in whole
    assert whole["model.layers.0.self_attn.qkv_proj.weight"].dtype in (torch.uint8, getattr(torch, "float8_e4m3fn", None))
    assert whole["lm_head.weight"].dtype == torch.bfloat16  # not converted
    # Within the fp8 round trip: |x - deq(x)| <= 2^-3 of the block's scale-aligned magnitude.
    w = full["model.layers.1.mlp.down_proj.weight"].float()
    data = whole["model.layers.1.mlp.down_proj.weight"].view(torch.uint8).long()
    scale = 2.0 ** (whole["model.layers.1.mlp.down_proj.weight.mx_scale"].long().float() - 127)
    deq = e4m3_values()[data] * scale.repeat_interleave(32, dim=-1)
    block_max = w.abs().reshape(w.shape[0], -1, 32).amax(-1).repeat_interleave(32, dim=-1)
    assert torch.all((deq - w).abs() <= block_max * 2.0 ** -3)
    # Sharded both ends: each engine rank's bytes are its slice of the whole model converted at once.
    plan, ranks = synced(2, 2, "fp8-tp2")
    for r, held in enumerate(ranks):
        for name, t in held.items():
            if name.startswith("mtp."):
                continue
            base = name[:-len(".mx_scale")] if name.endswith(".mx_scale") else name
            want = tp_slice(spec, base, whole[name], 2, r)
            assert same_bytes(t, want), f"rank {r}: {name}"


def test_the_plan_travels_to_actors_and_names_bad_layouts(tmp_path):
    import pickle

    spec = spec_of()
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=2), engines=[ws.ModelParallel(tp=2)], exclude=["mtp."])
    again = pickle.loads(pickle.dumps(plan))
    assert again.summary() == plan.summary()
    assert again.receiver_params(1) == plan.receiver_params(1)
    with pytest.raises(ws.WeightSyncError) as e:
        ws.SyncPlan(spec, trainer=ws.ModelParallel(tp=3), engines=[ws.ModelParallel(tp=1)])
    assert e.value.code == "INVALID_ARGUMENT"
    with pytest.raises(ws.WeightSyncError) as e:
        plan.sender_params(5)
    assert e.value.code == "OUT_OF_RANGE"


def sync_in_threads(plan, senders_tensors, tmp_path, group):
    """Every rank a thread of this process (ranks in processes are covered above); returns each
    engine rank's live tensors."""
    senders = [ws.WeightSender(plan, r, t, rendezvous=str(tmp_path), group=group)
               for r, t in enumerate(senders_tensors)]
    rxs = [ws.WeightReceiver(plan, r, rendezvous=str(tmp_path), group=group) for r in range(plan.num_receivers)]
    run_in_threads(*[lambda rx=rx: rx.update(1) for rx in rxs], *[lambda s=s: s.send(1) for s in senders])
    return [rx.views() for rx in rxs]


def check_engine_ranks(spec, full, engine_tps, got):
    rank = 0
    for tp in engine_tps:
        for r in range(tp):
            for name, t in got[rank].items():
                assert same_bytes(t, tp_slice(spec, name, full[name], tp, r)), f"engine rank {rank}: {name}"
            rank += 1


@pytest.mark.parametrize("shards", [2, 3])
def test_fsdp_flat_shards_to_tp_engines(tmp_path, shards):
    spec = spec_of()
    full = full_model(1)
    plan = ws.SyncPlan(spec, trainer=ws.Fsdp(shards=shards),
                       engines=[ws.ModelParallel(tp=1), ws.ModelParallel(tp=2)])
    # The reference cut: every parameter's bytes in model order, padded to a multiple of the
    # shard count and cut into equal ranges; a rank holds each parameter's part of its range, flat.
    flat = torch.cat([full[n].reshape(-1).view(torch.uint8) for n in spec.names()])
    size = -(-flat.numel() // shards)
    pieces = [{} for _ in range(shards)]
    start = 0
    for name in spec.names():
        nbytes = full[name].numel() * 4
        for r in range(shards):
            lo, hi = max(start, r * size), min(start + nbytes, (r + 1) * size)
            if lo < hi:
                piece = flat[lo:hi].clone()
                # A cut inside an element: the piece is lent as its bytes.
                whole = (lo - start) % 4 == 0 and (hi - lo) % 4 == 0
                pieces[r][name] = piece.view(torch.float32) if whole else piece
        start += nbytes
    cut_inside = 0
    for r in range(shards):
        assert [lp.name for lp in plan.sender_params(r)] == list(pieces[r])
        assert all(len(lp.shape) == 1 for lp in plan.sender_params(r))
        cut_inside += sum(lp.dtype == torch.uint8 for lp in plan.sender_params(r))
    assert cut_inside == (0 if shards == 2 else 2), "3 shards cut one element of this model in two"
    got = sync_in_threads(plan, pieces, tmp_path, "fsdp")
    check_engine_ranks(spec, full, [1, 2], got)


def test_pipeline_stages_to_a_tp_engine(tmp_path):
    spec = spec_of()
    full = full_model(1)
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(pp=2), engines=[ws.ModelParallel(tp=2)])
    stages = [[lp.name for lp in plan.sender_params(r)] for r in range(2)]
    assert stages[0] == [n for n in spec.names() if n.startswith(("model.embed", "model.layers.0."))]
    assert stages[1] == [n for n in spec.names() if n not in stages[0]]
    got = sync_in_threads(plan, [{n: full[n].clone() for n in names} for names in stages], tmp_path, "pp")
    check_engine_ranks(spec, full, [2], got)


def test_expert_parallel_trainer_to_a_tp_engine(tmp_path):
    experts, inter = 4, 32
    shapes = [("model.embed_tokens.weight", (VOCAB, H))]
    for layer in range(2):
        p = f"model.layers.{layer}.mlp"
        shapes.append((f"{p}.gate.weight", (experts, H)))
        for e in range(experts):
            shapes += [(f"{p}.experts.{e}.gate_up_proj.weight", (2 * inter, H)),
                       (f"{p}.experts.{e}.down_proj.weight", (H, inter))]
    shapes.append(("lm_head.weight", (VOCAB, H)))
    rules = [ws.Rule("*.gate_up_proj.weight", "column", fused=[inter, inter]), ws.Rule("*.down_proj.weight", "row"),
             ws.Rule("*embed_tokens.weight", "column"), ws.Rule("lm_head.weight", "column")]
    spec = ws.ModelSpec.from_named_parameters([(n, torch.empty(s)) for n, s in shapes], rules)
    assert spec.num_experts == experts and spec.num_layers == 2
    full = {n: torch.randn(s, generator=torch.Generator().manual_seed(i)) for i, (n, s) in enumerate(shapes)}
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(ep=2), engines=[ws.ModelParallel(tp=2)])
    held = [[lp.name for lp in plan.sender_params(r)] for r in range(2)]
    for r in range(2):  # EP rank r: experts 2r and 2r + 1 whole, every dense parameter
        mine = {f".experts.{e}." for e in (2 * r, 2 * r + 1)}
        assert held[r] == [n for n in spec.names() if ".experts." not in n or any(m in n for m in mine)]
    got = sync_in_threads(plan, [{n: full[n].clone() for n in names} for names in held], tmp_path, "ep")
    check_engine_ranks(spec, full, [2], got)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine with CUDA runs the NCCL sync below instead")
def test_nccl_without_a_device_fails_the_sync_at_once_naming_cuda(tmp_path):
    spec = spec_of()
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(), engines=[ws.ModelParallel()])
    tensors = {n: t.clone() for n, t in full_model(1).items()}
    if not ws._ws_native.has_nccl:
        with pytest.raises(ValueError, match="this build has no NCCL"):
            ws.WeightSender(plan, 0, tensors, rendezvous=str(tmp_path), transport="nccl")
        return
    sender = ws.WeightSender(plan, 0, tensors, rendezvous=str(tmp_path), group="nccl", transport="nccl")
    rx = ws.WeightReceiver(plan, 0, rendezvous=str(tmp_path), group="nccl", transport="nccl")
    for end in (lambda: sender.send(1), lambda: rx.update(1)):
        with pytest.raises(ws.WeightSyncError) as e:
            end()
        assert e.value.code == "FAILED_PRECONDITION" and "CUDA device 0 not available" in str(e.value), e.value
    assert rx.version == 0
    with pytest.raises(ValueError, match="transport tcp moves CPU tensors"):
        ws.WeightSender(plan, 0, {n: t.to("meta") for n, t in tensors.items()}, rendezvous=str(tmp_path))


@pytest.mark.skipif(torch.cuda.device_count() < 2 or not ws._ws_native.has_nccl,
                    reason="needs 2 CUDA devices and a build with NCCL (this machine has "
                           f"{torch.cuda.device_count()} devices)")
def test_cuda_tensors_go_over_nccl_between_two_devices(tmp_path):
    # One rank per device (NCCL allows no two ranks of a communicator on one GPU).
    spec = spec_of()
    plan = ws.SyncPlan(spec, trainer=ws.ModelParallel(), engines=[ws.ModelParallel()], exclude=["mtp."])
    trainer = {lp.name: torch.zeros(lp.shape, device="cuda:0") for lp in plan.sender_params(0)}
    engine = {lp.name: torch.full(lp.shape, 7.0, device="cuda:1") for lp in plan.receiver_params(0)}
    sender = ws.WeightSender(plan, 0, trainer, rendezvous=str(tmp_path), group="cuda")
    rx = ws.WeightReceiver(plan, 0, engine, rendezvous=str(tmp_path), group="cuda")
    assert sender.transport == rx.transport == "nccl"
    for version in (1, 2):
        full = full_model(version)
        with torch.no_grad():
            for name, t in trainer.items():
                t.copy_(full[name])
        run_in_threads(lambda v=version: rx.update(v), lambda v=version: sender.send(v))
        assert rx.version == version
        for name, t in engine.items():
            want = torch.full(t.shape, 7.0) if name.startswith("mtp.") else full[name]
            assert same_bytes(t.cpu(), want), f"{name} at version {version}"
