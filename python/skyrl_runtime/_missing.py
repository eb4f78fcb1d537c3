"""What Ray has and skyrl_runtime does not: reaching for it raises NotImplementedError that
names what to use instead (docs/python.md keeps the same list)."""

MISSING = {
    # top-level names of ray
    "data": "read data in your actors or tasks (torch DataLoader, datasets); no distributed datasets here",
    "train": "start trainer actors in a placement group yourself (examples/python/grpo)",
    "tune": "run trials as tasks or actors; no tuner here",
    "serve": "serve from actors (an engine actor per replica); no HTTP serving layer here",
    "dag": "call actors directly; compiled graphs are not supported",
    "cancel": "no task cancellation yet: give get() a timeout, kill() the actor",
    "timeline": "`skyrl timeline --job ID -o trace.json` writes a job's Chrome trace (every call of every "
                "actor, and its steps from report_step), also linked from the dashboard's job page",
    "get_runtime_env": "no runtime_env query yet: pass what the code needs as arguments",
    # ray.util names
    "util.collective": "skyrl_runtime.weight_sync for weights from trainers to engines; torch.distributed "
                       "(gloo, NCCL) across actors for other collectives, rank 0's address passed to the others",
    "util.state": "nodes(), the actor's _describe(), `skyrl status` and `skyrl list`",
    "util.metrics": "skyrl_runtime.report_step(step, metrics) for a job's training figures (the head "
                    "exports them as skyrl_job_* Prometheus metrics); no user-defined counters yet",
}


def missing(qualified):
    """The NotImplementedError for `qualified` (e.g. "util.collective")."""
    return NotImplementedError(f"ray.{qualified} is not supported by skyrl_runtime: {MISSING[qualified]}")


def module_getattr(prefix):
    """A module __getattr__ raising missing() for the names of MISSING under `prefix`."""
    def getattr_(name):
        key = f"{prefix}{name}"
        if key in MISSING:
            raise missing(key)
        raise AttributeError(f"module 'skyrl_runtime{'.' + prefix.rstrip('.') if prefix else ''}' has no attribute {name!r}")
    return getattr_
