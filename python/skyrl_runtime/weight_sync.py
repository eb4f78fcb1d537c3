"""skyrl_runtime.weight_sync: shard-to-shard weight sync on PyTorch tensors.

A trainer rank sends its own parameter tensors and an engine rank receives into its own, along a
plan the C++ planner makes from the model and both layouts (weight_sync/plan): every byte goes
once, from a trainer rank that holds it straight to the engine rank that needs it, with no
gather on trainer rank 0. The transfers are the C++ TCP transport's (Unix sockets and direct
writes into the receiver's memory between ranks on one host); versions, checksums and fp8
conversion are C++'s too. Python only describes the model and hands over tensor memory.

    spec = ModelSpec.from_named_parameters(full_model, rules=[
        Rule("*.qkv_proj.weight", "column", fused=[q, kv, kv], head_rows=[d, d, d]),
        Rule("*.o_proj.weight", "row"), ...])
    plan = SyncPlan(spec, trainer=ModelParallel(tp=2), engines=[ModelParallel(tp=1)] * 3)
    # on trainer rank r (its actor):      WeightSender(plan, r, model).send(step)
    # on engine rank r (its actor):       rx = WeightReceiver(plan, r, engine_model); rx.init()
    #                                     rx.update(step)

Senders and receivers find each other through the cluster's KV store (or a directory, for
processes on one machine without a cluster). docs/weight_sync.md has the design and the mapping
to SkyRL's weight-update calls.
"""

import fnmatch
import os
import re
import threading
from collections import namedtuple

import torch

from . import _api
from ._native import Error as _NativeError
from ._native import weight_sync as _ws_native
from .exceptions import WeightSyncError

__all__ = ["Fsdp", "LocalParam", "ModelParallel", "ModelSpec", "Rule", "SyncPlan", "WeightReceiver",
           "WeightSender", "WeightSyncError"]

_DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64",
                torch.int32: "i32", torch.uint8: "u8"}
for _name, _attr in (("fp8_e4m3", "float8_e4m3fn"), ("fp8_e5m2", "float8_e5m2")):
    if hasattr(torch, _attr):
        _DTYPE_NAMES[getattr(torch, _attr)] = _name
_TORCH_DTYPES = {v: k for k, v in _DTYPE_NAMES.items()}
# Without torch's float8 types (torch < 2.1) fp8 tensors are their bytes, as uint8.
_TORCH_DTYPES.setdefault("fp8_e4m3", torch.uint8)
_TORCH_DTYPES.setdefault("fp8_e5m2", torch.uint8)

_SPLITS = {"column": 0, "row": 1, "replicated": -1}
_PRE_LAYERS, _POST_LAYERS = -1, -2  # weight_sync::kPreLayers, kPostLayers


def _checked(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except _NativeError as e:
        raise WeightSyncError(str(e), e.code) from None


def _dtype_name(dtype, what):
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        raise ValueError(f"{what}: dtype {dtype} is not one weight sync moves "
                         f"({', '.join(str(d) for d in _DTYPE_NAMES)})") from None


class Rule:
    """How the parameters whose names match `pattern` (fnmatch, e.g. "*.o_proj.weight") are
    split across tensor-parallel ranks.

    split: "column" (dim 0: QKV, gate/up, embeddings, LM head), "row" (dim 1: o_proj,
    down_proj), "replicated" (norms, routers), or a dimension. fused: sizes of fused sub-blocks
    along dim 0, each split on its own (a TP rank holds [q_t; k_t; v_t]). head_rows: per block,
    the rows of one attention head (a block with fewer heads than TP ranks is replicated per
    head, as vLLM does). layer / expert override what the name says."""

    def __init__(self, pattern, split="replicated", *, fused=None, head_rows=None, layer=None, expert=None):
        self.pattern = pattern
        if isinstance(split, str):
            if split not in _SPLITS:
                raise ValueError(f"Rule {pattern!r}: split must be column, row, replicated or a dimension, "
                                 f"not {split!r}")
            split = _SPLITS[split]
        self.split = int(split)
        self.fused = [int(x) for x in fused or ()]
        self.head_rows = [int(x) for x in head_rows or ()]
        self.layer = layer
        self.expert = expert

    def matches(self, name):
        return fnmatch.fnmatchcase(name, self.pattern)


_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_EXPERT = re.compile(r"(?:^|\.)experts\.(\d+)\.")


class ModelSpec:
    """The full model as weight sync sees it: per parameter its full shape, dtype, split rule,
    layer (for pipeline stages) and expert (for expert parallelism), in sync order."""

    def __init__(self, params):
        self.params = [dict(p) for p in params]
        layers = [p["layer"] for p in self.params if p["layer"] >= 0]
        experts = [p["expert"] for p in self.params if p["expert"] >= 0]
        self.num_layers = max(layers) + 1 if layers else 0
        self.num_experts = max(experts) + 1 if experts else 0

    @classmethod
    def from_named_parameters(cls, named, rules=()):
        """From the full model's parameters: a module (its named_parameters(), which may live on
        the "meta" device) or (name, tensor) pairs. The first rule matching a name decides its
        split; names no rule matches are replicated. The layer is the number after "layers."
        ("model.layers.3.mlp..."), else the first stage for names with "embed" or "visual." and
        the last for the rest; the expert is the number after "experts."."""
        if hasattr(named, "named_parameters"):
            named = named.named_parameters()
        params = []
        for name, tensor in named:
            rule = next((r for r in rules if r.matches(name)), None) or Rule(name)
            m = _LAYER.search(name)
            layer = int(m.group(1)) if m else (_PRE_LAYERS if ("embed" in name or name.startswith("visual."))
                                               else _POST_LAYERS)
            e = _EXPERT.search(name)
            params.append({
                "name": name, "shape": [int(d) for d in tensor.shape],
                "dtype": _dtype_name(tensor.dtype, f"param {name!r}"),
                "split_dim": rule.split, "fused": rule.fused, "head_rows": rule.head_rows,
                "layer": layer if rule.layer is None else int(rule.layer),
                "expert": (int(e.group(1)) if e else -1) if rule.expert is None else int(rule.expert)})
        return cls(params)

    def names(self):
        return [p["name"] for p in self.params]


class ModelParallel:
    """Megatron/vLLM-style sharding of one model: tp x pp x ep ranks per replica, TP innermost
    (rank = ((replica * pp + stage) * ep + ep_index) * tp + tp_index). experts="whole": experts
    spread whole over all tp*ep ranks of a stage (vLLM's EP); "ep_then_tp": experts in blocks
    per EP rank, each split by TP (Megatron)."""

    def __init__(self, tp=1, pp=1, ep=1, replicas=1, experts="ep_then_tp", stage_first_layer=()):
        if experts not in ("ep_then_tp", "whole"):
            raise ValueError(f"ModelParallel: experts must be ep_then_tp or whole, not {experts!r}")
        self.tp, self.pp, self.ep, self.replicas = int(tp), int(pp), int(ep), int(replicas)
        self.experts = experts
        self.stage_first_layer = [int(x) for x in stage_first_layer]

    def ranks(self):
        return self.tp * self.pp * self.ep * self.replicas

    def _native(self):
        return {"kind": "model_parallel", "tp": self.tp, "pp": self.pp, "ep": self.ep, "replicas": self.replicas,
                "experts_whole": self.experts == "whole", "stage_first_layer": self.stage_first_layer}


class Fsdp:
    """FSDP (ZeRO-3) flat shards: every parameter's bytes concatenated in model order and cut
    into `shards` equal pieces; HSDP with replicas > 1."""

    def __init__(self, shards=1, replicas=1):
        self.shards, self.replicas = int(shards), int(replicas)

    def ranks(self):
        return self.shards * self.replicas

    def _native(self):
        return {"kind": "fsdp", "shards": self.shards, "replicas": self.replicas}


def _groups(layout):
    return list(layout) if isinstance(layout, (list, tuple)) else [layout]


# One parameter of one rank's shard: its local tensor's shape and dtype (the torch dtype), and
# where its bytes sit in the rank's shard buffer.
LocalParam = namedtuple("LocalParam", "name shape dtype offset nbytes")


def _fp8_default(p):
    """The weights vLLM's fp8 rollouts quantize: bf16 matrices of linear layers (last dim a
    multiple of 32), not embeddings, the LM head, norms or routers."""
    name = p["name"]
    return (p["dtype"] == "bf16" and len(p["shape"]) >= 2 and p["shape"][-1] % 32 == 0
            and name.endswith(".weight") and not any(s in name for s in ("embed", "lm_head", "norm", ".gate.weight")))


class SyncPlan:
    """The sync of `spec` from the trainer's layout to the engines' (one ModelParallel per
    engine; engine e's ranks follow engine e-1's), planned once in C++ and kept for every step.

    exclude: name substrings not synced (MTP heads "mtp.", a frozen "visual."); lora_only: only
    LoRA adapters ("lora_" names); keep: a callable(name) -> bool choosing further; fp8: True
    (the linear weights, as vLLM quantizes them), a callable(name) -> bool or a list of names:
    those bf16 weights arrive as fp8 e4m3 with one E8M0 scale per 32 elements in
    "<name>.mx_scale" (u8), converted by each sender from its own shard."""

    def __init__(self, spec, trainer, engines, *, exclude=(), lora_only=False, keep=None, fp8=None):
        self.spec = spec
        self.trainer = _groups(trainer)
        self.engines = _groups(engines)
        kept = None if keep is None else [n for n in spec.names() if keep(n)]
        converted = None
        if fp8 is True:
            converted = [p["name"] for p in spec.params if _fp8_default(p)]
        elif callable(fp8):
            converted = [n for n in spec.names() if fp8(n)]
        elif fp8:
            converted = list(fp8)
        self.fp8 = converted
        self._args = (list(exclude), bool(lora_only), kept, converted)
        self._native = _checked(_ws_native.SyncPlan, spec.params, spec.num_layers, spec.num_experts,
                                [g._native() for g in self.trainer], [g._native() for g in self.engines],
                                *self._args)
        self._summary = self._native.summary()

    def __reduce__(self):
        # Travels to actors as its description; each process plans again (deterministic).
        exclude, lora_only, kept, converted = self._args
        keep = None if kept is None else frozenset(kept).__contains__
        return _plan, (self.spec, self.trainer, self.engines, exclude, lora_only, keep, converted)

    @property
    def num_senders(self):
        return self._summary["senders"]

    @property
    def num_receivers(self):
        return self._summary["receivers"]

    def summary(self):
        """senders, receivers, transfers, bytes (one sync), predicted_s and lower_bound_s
        under the default cost model, and the names of the parameters synced."""
        return dict(self._summary)

    def sender_params(self, rank):
        """What trainer rank `rank` holds, in its shard's order."""
        return self._locals(_checked(self._native.sender_entries, int(rank)))

    def receiver_params(self, rank):
        """What engine rank `rank` holds (with fp8, the converted weights and their scales)."""
        return self._locals(_checked(self._native.receiver_entries, int(rank)))

    @staticmethod
    def _locals(entries):
        return [LocalParam(e["name"], tuple(e["shape"]), _TORCH_DTYPES[e["dtype"]], e["offset"], e["nbytes"])
                for e in entries]


def _plan(spec, trainer, engines, exclude, lora_only, keep, fp8):
    return SyncPlan(spec, trainer, engines, exclude=exclude, lora_only=lora_only, keep=keep, fp8=fp8)


def _named(tensors):
    if tensors is None:
        return None
    if hasattr(tensors, "named_parameters"):
        return dict(tensors.named_parameters())
    return dict(tensors)


def _check_tensors(tensors, expected, who):
    """The caller's tensors against the plan's local params: every name there, the same shape and
    dtype, contiguous. ValueError naming the first that is not."""
    names = {lp.name for lp in expected}
    extra = sorted(set(tensors) - names)
    if extra:
        raise ValueError(f"{who}: {extra[0]!r} is not a parameter this rank holds in the plan "
                         f"({len(extra)} such name{'s' if len(extra) > 1 else ''})")
    for lp in expected:
        t = tensors.get(lp.name)
        if t is None:
            raise ValueError(f"{who}: no tensor for {lp.name!r}, which this rank holds in the plan")
        if tuple(t.shape) != lp.shape:
            raise ValueError(f"{who}: {lp.name!r} has shape {tuple(t.shape)}, the plan says {lp.shape}")
        if t.dtype != lp.dtype:
            raise ValueError(f"{who}: {lp.name!r} is {t.dtype}, the plan says {lp.dtype}")
        if t.numel() * t.element_size() != lp.nbytes:
            raise ValueError(f"{who}: {lp.name!r} holds {t.numel() * t.element_size()} bytes, the plan "
                             f"{lp.nbytes}")
        if not t.is_contiguous():
            raise ValueError(f"{who}: {lp.name!r} is not contiguous")
    seen = {}
    for name, t in tensors.items():
        if t.numel() and t.data_ptr() and t.data_ptr() in seen:
            raise ValueError(f"{who}: {name!r} and {seen[t.data_ptr()]!r} share memory; give each parameter "
                             f"its own tensor (tied weights are one parameter)")
        seen[t.data_ptr()] = name


def _views(buffer, params):
    """Tensors over `buffer` (a native Buffer), one per local param, sharing its memory."""
    out = {}
    for lp in params:
        count = lp.nbytes // torch.empty((), dtype=lp.dtype).element_size()
        t = torch.frombuffer(buffer, dtype=lp.dtype, count=count, offset=lp.offset) if count else \
            torch.empty(0, dtype=lp.dtype)
        out[lp.name] = t.view(lp.shape)
    return out


def _device_views(flat, params):
    """Tensors over `flat` (a uint8 torch tensor, any device), one per local param."""
    out = {}
    for lp in params:
        piece = flat.narrow(0, lp.offset, lp.nbytes)
        try:
            out[lp.name] = piece.view(lp.dtype).view(lp.shape)
        except RuntimeError:
            raise ValueError(f"{lp.name!r} starts at byte {lp.offset} of the rank's shard, not aligned for "
                             f"{lp.dtype} on this device: keep its tensors where they are (pack=False)") from None
    return out


def _device_of(tensors, transport, who):
    """(device, transport) for a rank's tensors: one device; "tcp" for CPU tensors and "nccl"
    (in builds with NCCL) for CUDA ones unless `transport` says otherwise."""
    devices = sorted({str(t.device) for t in (tensors or {}).values()})
    if len(devices) > 1:
        raise ValueError(f"{who}: tensors on {', '.join(devices)}; a rank's tensors are on one device")
    device = torch.device(devices[0] if devices else "cpu")
    transport = transport or ("nccl" if device.type == "cuda" else "tcp")
    if transport not in ("tcp", "nccl"):
        raise ValueError(f"{who}: transport must be tcp or nccl, not {transport!r}")
    if transport == "tcp" and device.type != "cpu":
        raise ValueError(f"{who}: transport tcp moves CPU tensors; these are on {device} (transport nccl)")
    if transport == "nccl" and not _ws_native.has_nccl:
        raise ValueError(f"{who}: transport nccl: this build has no NCCL (configure with CUDA and NCCL)")
    return device, transport


def _check_delta(delta, transport, who):
    if not isinstance(delta, bool):
        raise TypeError(f"{who}: delta must be True or False, not {delta!r}")
    if delta and transport != "tcp":
        raise ValueError(f"{who}: delta=True needs transport tcp (this sync moves {transport})")


def _endpoint(rendezvous, group, io_timeout, checksums, transport, device, **extra):
    kind, where, token = _rendezvous(rendezvous)
    return {"rendezvous": kind, "where": where, "token": token, "prefix": f"weight_sync/{group}",
            "transport": transport, "io_timeout": float(io_timeout), "checksums": bool(checksums),
            "device": (device.index or 0) if device.type == "cuda" else 0, **extra}


def _copy_in(buffer, params, tensors):
    """Each tensor's bytes into its place in a native Buffer: one memcpy each in C++ for CPU
    tensors, a torch copy from the device otherwise."""
    if all(tensors[lp.name].device.type == "cpu" for lp in params):
        buffer.pack(*_copy_plan(params, tensors))
        return
    for name, view in _views(buffer, params).items():
        view.copy_(tensors[name])


def _copy_out(buffer, params, tensors):
    if all(tensors[lp.name].device.type == "cpu" for lp in params):
        buffer.unpack(*_copy_plan(params, tensors))
        return
    with torch.no_grad():
        for name, view in _views(buffer, params).items():
            tensors[name].copy_(view)


def _rebind(t, view):
    """Makes `t` (a Parameter or tensor) use `view`'s memory, keeping its identity (optimizer
    state and module references stay valid)."""
    t.data = view


def _copy_plan(params, tensors):
    offsets, addresses, sizes = [], [], []
    for lp in params:
        t = tensors[lp.name]
        offsets.append(lp.offset)
        addresses.append(t.data_ptr())
        sizes.append(lp.nbytes)
    return offsets, addresses, sizes


def _rendezvous(rendezvous):
    """("kv", head address, token) for the cluster's KV store, or ("dir", path, "")."""
    if rendezvous is not None:
        os.makedirs(rendezvous, exist_ok=True)
        return "dir", str(rendezvous), ""
    state = _api._current()
    return "kv", state.address, state.token


class WeightSender:
    """Trainer rank `rank`'s end of a sync.

    `params`: the rank's local tensors (a module, or a dict name -> tensor), each its shard of
    the parameter as the plan cuts it (sender_params(rank) lists them), all on one device. With
    pack (the default), the tensors are moved once, here, into one shard buffer in the plan's
    order and keep using it (their values and identities stay, so optimizers and modules keep
    working); every send then reads them in place. pack=False leaves them where they are and
    copies them into the buffer at each send.

    CPU tensors go over the TCP transport, CUDA tensors over NCCL (builds with NCCL; the
    communicator is formed at the first send, which every rank of the sync joins). group: names
    the sync, so several can run in one cluster; senders and receivers of one sync use the same,
    and a new run takes a new name. rendezvous: a directory for processes on one machine without
    a cluster; default, the cluster's KV store. delta=True (TCP, with receivers that also ask
    for it): each version after the first goes to a receiver on another host as the changes
    against the version it holds (docs/weight_sync.md "Deltas"; delta_stats says how much)."""

    def __init__(self, plan, rank, params, *, group="weights", pack=True, rendezvous=None, io_timeout=30.0,
                 checksums=False, transport=None, delta=False):
        self.plan, self.rank = plan, int(rank)
        who = f"WeightSender rank {self.rank}"
        self._params = plan.sender_params(self.rank)
        tensors = _named(params)
        _check_tensors(tensors, self._params, who)
        self.device, self.transport = _device_of(tensors, transport, who)
        _check_delta(delta, self.transport, who)
        self._native = _checked(_ws_native.Sender, plan._native, self.rank,
                                _endpoint(rendezvous, group, io_timeout, checksums, self.transport, self.device,
                                          delta=bool(delta)))
        buffer = self._native.shard()  # host memory (TCP); else a torch tensor on the device
        self._flat = None if buffer is not None else torch.empty(self._native.shard_bytes, dtype=torch.uint8,
                                                                  device=self.device)
        views = _views(buffer, self._params) if buffer is not None else _device_views(self._flat, self._params)
        self._source, self._views, self._buffer = tensors, views, buffer
        self.packed = bool(pack)
        self._packed = None
        if pack:
            with torch.no_grad():
                for name, view in views.items():
                    view.copy_(tensors[name])
                    _rebind(tensors[name], view)
            self._source, self._packed = None, tensors
        self._lock = threading.Lock()

    def _check_packed(self):
        # A packed tensor moved out of the buffer (.to(), .half(), a re-assigned .data) would
        # leave the sync sending stale bytes: refuse instead.
        for name, t in self._packed.items():
            if t.data_ptr() != self._views[name].data_ptr():
                raise WeightSyncError(f"WeightSender rank {self.rank}: {name!r} no longer lives in the sync's "
                                      f"buffer (moved or re-assigned after packing); create the WeightSender "
                                      f"again", "FAILED_PRECONDITION")

    @property
    def wire_bytes(self):
        """Bytes this rank puts on the wire per sync (every byte; with delta=True, see
        delta_stats)."""
        return self._native.wire_bytes

    @property
    def delta_stats(self):
        """With delta=True, over every send so far: {"bytes": payload sent as delta frames,
        "wire_bytes": what those frames took on the wire, "frames": frames sent compressed,
        "raw_frames": frames sent raw (the delta did not pay)}."""
        return dict(self._native.delta_stats)

    def send(self, version):
        """Sends the tensors' current values as `version` (an integer larger than every engine's
        current one) to every engine rank the plan gives bytes from this rank; returns once each
        has them all, verified. WeightSyncError names the engine rank and what failed."""
        with self._lock:
            if self._packed is not None:
                self._check_packed()
            if self._source is not None:
                if self._buffer is not None:
                    _copy_in(self._buffer, self._params, self._source)
                else:
                    with torch.no_grad():
                        for name, view in self._views.items():
                            view.copy_(self._source[name])
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)  # the optimizer's kernels have written the weights
            _checked(self._native.send, int(version), 0 if self._flat is None else self._flat.data_ptr())


class WeightReceiver:
    """Engine rank `rank`'s end of a sync: one object with init(), update(version) and version,
    for an inference engine to call from its own process.

    `tensors`: the engine's own weights (a module or a dict), checked against the plan here,
    before anything is written. After each update they hold the new version: by default copied
    in from a staging buffer once every sender's bytes are in and verified (on any failure they
    are untouched); with bind=True they are instead re-pointed at the new version's memory (no
    copy; the engine must not keep other views of the old weights). Without tensors, views()
    gives the live version.

    The live version changes only inside update(), so an engine that calls it between its own
    steps never serves a mix of two. staging="in_place" receives into the live memory itself
    (one shard of memory less; no views() of the live version may be held during the update, so
    not with bind; a failure leaves the receiver's shard torn until a later update succeeds,
    while the engine's own tensors keep the previous version).

    CUDA tensors are received over NCCL (builds with NCCL; formed at the first update, which
    every rank of the sync joins) into a staging buffer in host memory, then copied to the
    device at the commit (bind needs CPU tensors). delta=True: take versions from senders on
    other hosts as changes against the one held (TCP; the result is the same bytes)."""

    def __init__(self, plan, rank, tensors=None, *, group="weights", bind=False, rendezvous=None, host=None,
                 io_timeout=30.0, checksums=False, staging="copy", transport=None, delta=False):
        if staging not in ("copy", "in_place"):
            raise ValueError(f"WeightReceiver: staging must be copy or in_place, not {staging!r}")
        self.plan, self.rank = plan, int(rank)
        who = f"WeightReceiver rank {self.rank}"
        self._params = plan.receiver_params(self.rank)
        synced = set(plan.summary()["synced"])
        self._moved = [lp for lp in self._params if lp.name in synced]  # what an update changes
        self._tensors = _named(tensors)
        if self._tensors is not None:
            _check_tensors(self._tensors, self._params, who)
        self.device, self.transport = _device_of(self._tensors, transport, who)
        if bind and (self._tensors is None or self.device.type != "cpu"):
            raise ValueError(f"{who}: bind=True needs the engine's tensors, on the CPU")
        if bind and staging == "in_place":
            raise ValueError(f"{who}: bind=True keeps the live version in use, which in-place staging "
                             f"must overwrite: use staging='copy'")
        _check_delta(delta, self.transport, who)
        self._bind = bool(bind)
        self._options = dict(group=group, rendezvous=rendezvous, io_timeout=float(io_timeout),
                             checksums=bool(checksums), in_place=staging == "in_place", delta=bool(delta),
                             host=host or os.environ.get("SKYRL_NODE_HOST") or "127.0.0.1")
        self._native = None
        self._prepared = 0  # the version prepare() left staged, or 0
        self._lock = threading.Lock()

    def init(self):
        """Listens for senders and publishes this rank's address (SkyRL's
        init_weight_update_communicator). The engine's current tensors become version 0, so a
        sync that moves only some parameters (LoRA) keeps the rest. Idempotent."""
        with self._lock:
            if self._native is not None:
                return
            o = self._options
            endpoint = _endpoint(o["rendezvous"], o["group"], o["io_timeout"], o["checksums"], self.transport,
                                 self.device, bind_host=o["host"], in_place=o["in_place"], delta=o["delta"])
            native = _checked(_ws_native.Receiver, self.plan._native, self.rank, endpoint)
            if self._tensors is not None:
                initial = native.new_buffer()
                _copy_in(initial, self._params, self._tensors)
                _checked(native.load, 0, initial)
                if self._bind:
                    self._rebind(native)
            self._native = native

    @property
    def version(self):
        """The version being served (0 before the first update)."""
        return 0 if self._native is None else self._native.version

    def update(self, version):
        """Receives `version` from every trainer rank the plan names and makes it live (SkyRL's
        update_named_weights): prepare(version), then commit(). On failure raises
        WeightSyncError naming the sender and what failed; the previous version stays live and
        the engine's tensors are untouched."""
        self.prepare(version)
        self.commit()

    def prepare(self, version):
        """The first half of update(): receives `version` and verifies it, without making it
        live. An engine of several ranks prepares on every rank, then commits every rank if all
        succeeded and aborts every rank otherwise, so that its ranks never serve two versions."""
        self.init()
        with self._lock:
            if self._prepared:
                raise WeightSyncError(f"version {self._prepared} is prepared: commit() or abort() it first",
                                      "FAILED_PRECONDITION")
            _checked(self._native.receive, int(version))
            self._prepared = int(version)

    def commit(self):
        """Makes the prepared version live (copying it into the engine's tensors, or
        re-pointing them with bind). FAILED_PRECONDITION when nothing is prepared. The copy is
        the only step that can fail after the bytes arrived (a torch error): the version is then
        aborted and the engine's tensors may hold part of it until the next update."""
        with self._lock:
            if not self._prepared:
                raise WeightSyncError("no version is prepared", "FAILED_PRECONDITION")
            native = self._native
            self._prepared = 0
            try:
                if self._tensors is not None and not self._bind:
                    _copy_out(native.staged(), self._moved, self._tensors)
                _checked(native.commit)
            except BaseException:
                native.abort()
                raise
            if self._bind:
                self._rebind(native)

    def abort(self):
        """Drops a prepared version; the live one stays."""
        with self._lock:
            if self._native is not None:
                self._native.abort()
            self._prepared = 0

    def views(self):
        """The live version's tensors (name -> tensor), sharing the receiver's memory; {} before
        init(). Take them again after each update."""
        if self._native is None:
            return {}
        current = self._native.current()
        return {} if current is None else _views(current, self._params)

    def _rebind(self, native):
        current = native.current()
        views = _views(current, self._params)
        for name, view in views.items():
            _rebind(self._tensors[name], view)
