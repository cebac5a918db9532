"""Which tasks can run in this install: registered, importable, and with their splits.

A task is available when its Gymnasium id is registered (after importing the module of a
``"module:Env-v0"`` id) and every split asked for builds an environment with at least
one instance. The trainer's ``skip_unavailable_tasks`` drops the others with the reason
this module gives.

>>> task_problem("no_such_module:Nope-v0", ["train"])
'not installed'
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym

from .layout import resolve_env_id


def task_problem(
    name: str, splits: Iterable[str], env_kwargs: Mapping[str, Any] | None = None
) -> str | None:
    """Why task ``name`` (a task id or a Gymnasium id) cannot run on ``splits`` here, or
    None when it can. ``env_kwargs`` go to each environment built to check a split."""
    env_id = resolve_env_id(name)
    module, _, registered_id = env_id.rpartition(":")  # gym.make's "module:Env-v0" form
    try:
        if module:
            importlib.import_module(module)
        gym.spec(registered_id)
    except (gym.error.Error, ImportError):
        return "not installed"
    for split in dict.fromkeys(splits):
        try:
            env = gym.make(env_id, split=split, **dict(env_kwargs or {}))
            try:
                if env.unwrapped.num_tasks < 1:  # type: ignore[attr-defined]
                    return f"{split} split is empty"
            finally:
                env.close()
        except Exception as error:  # any reason a task cannot run is a reason to skip it
            return f"{split} split unavailable ({type(error).__name__}: {error})"
    return None
