"""Ray's options for actors and tasks, in one table (as Ray's ray_option_utils keeps them):
each option says whether actors take it, whether tasks do, and how its value is checked.
`.options()`, `@remote(...)` and task creation check through `check` here.

Adding an actor option: a row here, then docs/architecture.md, "Adding an actor option".
Method options (`@method`, `.options()` of one method) are _methods.check's."""

import os
from typing import Any, Callable, Dict, NamedTuple, Optional

from . import _methods


def check_label_selector(selector: Any, what: str = "options: label_selector") -> None:
    """Ray's label_selector: node labels the actor or task needs, {"name": "value"}. Values
    must match exactly here; Ray's operators ("!v", "in(a,b)", "!in(...)") are refused."""
    if not isinstance(selector, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
        raise TypeError(f"{what} must map str to str, got {selector!r}")
    for k, v in selector.items():
        if v.startswith("!") or v.startswith("in(") or v.startswith("!in("):
            raise NotImplementedError(f"{what}[{k!r}] = {v!r}: only exact values are supported "
                                      "(no !, in() or !in())")


def check_fallback_strategy(fallbacks: Any, what: str = "options: fallback_strategy") -> None:
    """Ray's fallback_strategy: [{"label_selector": {...}}, ...], the selectors tried in order
    when no node matching label_selector has room (at most 16)."""
    if not isinstance(fallbacks, (list, tuple)):
        raise TypeError(f"{what} must be a list of dicts, got {fallbacks!r}")
    if len(fallbacks) > 16:
        raise ValueError(f"{what} has {len(fallbacks)} options (at most 16)")
    for i, option in enumerate(fallbacks):
        if not isinstance(option, dict) or "label_selector" not in option:
            raise TypeError(f"{what}[{i}] must be a dict with a label_selector, got {option!r}")
        unknown = sorted(set(option) - {"label_selector"})
        if unknown:
            raise NotImplementedError(f"{what}[{i}]: {unknown[0]} is not supported (label_selector is)")
        check_label_selector(option["label_selector"], "options: label_selector")


RUNTIME_ENV_KEYS = ("env_vars", "working_dir")


def check_runtime_env(env: Any, what: str) -> None:
    """Validates a runtime_env: env_vars (str to str) and working_dir (a local folder)."""
    if env is None:
        return
    if not isinstance(env, dict):
        raise TypeError(f"{what}: a dict, got {type(env).__name__}")
    unknown = sorted(set(env) - set(RUNTIME_ENV_KEYS))
    if unknown:
        raise NotImplementedError(f"{what}: {unknown[0]} is not supported ({' and '.join(RUNTIME_ENV_KEYS)} are; "
                                  "install packages into the worker's interpreter, skyrl-worker --python)")
    env_vars = env.get("env_vars") or {}
    if not isinstance(env_vars, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env_vars.items()):
        raise TypeError(f"{what}: env_vars must map str to str")
    working_dir = env.get("working_dir")
    if working_dir is not None:
        if not isinstance(working_dir, (str, os.PathLike)):
            raise TypeError(f"{what}: working_dir must be a path, got {type(working_dir).__name__}")
        if not os.path.isdir(working_dir):
            raise ValueError(f"{what}: working_dir {os.fspath(working_dir)!r} is not a folder")


def _resources(value: Any, what: str) -> None:
    if value is not None and "bundle" in value:
        raise ValueError(f"{what}: 'bundle' is a name Ray reserves for placement-group bundles")


def _name(value: Any, what: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {value!r}")


def _max_calls(value: Any, what: str) -> None:
    if value is not None and (type(value) is not int or value < 0):
        raise ValueError(f"{what} must be an int >= 0 (0: no limit), got {value!r}")


def _max_pending_calls(value: Any, what: str) -> None:
    if type(value) is not int or (value != -1 and value < 1):
        raise ValueError(f"{what} must be -1 (no limit) or an int >= 1, got {value!r}")


class Option(NamedTuple):
    actor: bool  # actors take it
    task: bool  # tasks take it
    check: Optional[Callable[[Any, str], None]] = None  # (value, "options: <name>"); None: no check here
    task_check: Optional[Callable[[Any, str], None]] = None  # for tasks only, after `check`


def _skip_none(check: Callable[[Any, str], None]) -> Callable[[Any, str], None]:
    return lambda value, what: None if value is None else check(value, what)


OPTIONS: Dict[str, Option] = {
    # Resources and placement.
    "num_cpus": Option(True, True),
    "num_gpus": Option(True, True),
    "memory": Option(True, True),
    "resources": Option(True, True, lambda v, what: _resources(v, "options: resources")),
    "scheduling_strategy": Option(True, True),
    "placement_group": Option(True, True),
    "placement_group_bundle_index": Option(True, True),
    "placement_group_capture_child_tasks": Option(True, True),
    "label_selector": Option(True, True, _skip_none(lambda v, what: check_label_selector(v))),
    "fallback_strategy": Option(True, True, _skip_none(lambda v, what: check_fallback_strategy(v))),
    "runtime_env": Option(True, True, check_runtime_env),
    # Actors.
    "name": Option(True, True, task_check=_name),  # an actor's: the native spec checks it
    "namespace": Option(True, False),
    "lifetime": Option(True, False),
    "get_if_exists": Option(True, False),
    "max_restarts": Option(True, False),
    "max_task_retries": Option(True, False),
    "max_concurrency": Option(True, False),
    "concurrency_groups": Option(True, False, lambda v, what: _methods.check_concurrency_groups(v, "options")),
    "max_pending_calls": Option(True, False, _max_pending_calls),
    # Tasks.
    "max_retries": Option(False, True),
    "num_returns": Option(False, True, lambda v, what: _methods.check({"num_returns": v}, "options")),
    "retry_exceptions": Option(False, True, lambda v, what: _methods.check_retry_exceptions(v, "options")),
    "max_calls": Option(False, True, _max_calls),
}

def check(options: Dict[str, Any], kind: str) -> None:
    """Checks `options` for an actor (`kind` "actor") or a task ("task"): TypeError naming an
    unknown option, ValueError (or TypeError, NotImplementedError) naming a bad value."""
    takes = (lambda o: o.actor) if kind == "actor" else (lambda o: o.task)
    for key, value in options.items():
        option = OPTIONS.get(key)
        if option is None or not takes(option):
            known = ", ".join(sorted(name for name, o in OPTIONS.items() if takes(o)))
            raise TypeError(f"options: unknown {'task ' if kind == 'task' else ''}option {key} (known: {known})")
        if option.check is not None:
            option.check(value, f"options: {key}")
        if kind == "task" and option.task_check is not None:
            option.task_check(value, f"options: {key}")
