"""The tasks: one :func:`register_task` call each, the only list of tasks there is.

A task is a folder (its environment, task files, generator and expert) plus one call
here, or in user code, that names them; every other part of the package (the trainer's
default tasks and its config checks, the vector env, the fresh-instance generators, the
server) reads :data:`ENVIRONMENTS`. Registering a task also registers its Gymnasium id,
so ``gym.make("agentgym_eppo:AgentBench-DB-v0")`` works with no explicit import.

>>> ENVIRONMENTS["kg"].env_id, ENVIRONMENTS["kg"].task_file("dev").name
('AgentBench-KG-v0', 'dev.jsonl.gz')
>>> ENVIRONMENTS.lookup("alfwrld", where="tasks")
Traceback (most recent call last):
...
agentgym_eppo.core.registry.UnknownNameError: tasks: unknown task 'alfwrld' (did you mean 'alfworld'?); known: alfworld, db, kg, os, webshop
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from agentgym_eppo.core.registry import Registry
from agentgym_eppo.core.tasks import asset_path

PACKAGE = __name__.partition(".")[0]


@dataclass(frozen=True)
class TaskSpec:
    """What one :func:`register_task` call says about a task family."""

    env_id: str
    """Its Gymnasium id (``AgentBench-KG-v0``)."""
    env: str | Callable[..., gym.Env[Any, Any]]
    """The environment: its class, or ``"module:Class"`` (imported when first made)."""
    task_files: str | None = None
    """Where its instances are shipped, a path with ``{split}``: relative paths are under
    ``agentgym_eppo/assets/<task_id>/``. None: the env finds its own."""
    generator: str | None = None
    """The module that draws fresh instances (pretraining): it defines
    ``fresh_tasks(count, seed) -> list[dict]`` (rows the env's ``tasks=`` accepts),
    ``content_key(row) -> str`` (what makes two rows the same instance; rows whose key
    matches a dev or test instance are dropped) and, where a row's id is not its
    ``sample_id`` field, ``ID_FIELD``. None: the task has no generator."""
    expert: bool = True
    """The env's ``expert_action()`` solves its instances (SFT and pretraining play it).
    False: the task has none, and a run that records expert episodes of it is refused
    when its config is built."""
    blind_answer: Mapping[str, Any] | None = field(default=None, hash=False)
    """The task's answer call made before any tool has shown anything (a tool call,
    ``{"name": ..., "arguments": ...}``): what pretraining's hasty demonstrator plays.
    None: no hasty episodes for this task."""
    task_id: str = ""

    @property
    def make_id(self) -> str:
        """The id ``gym.make`` resolves in any process: a task registered outside the
        package gets the module of its env as a prefix (``module:Env-v0``), which
        ``gym.make`` imports first, so a worker process registers it too."""
        module = self.env.partition(":")[0] if isinstance(self.env, str) else self.env.__module__
        if module == PACKAGE or module.startswith(f"{PACKAGE}."):
            return self.env_id
        return f"{module}:{self.env_id}"

    def env_class(self) -> Any:
        """The environment's class (imported on first use when named by a string)."""
        return load_env_creator(self.env) if isinstance(self.env, str) else self.env

    def task_file(self, split: str) -> Path:
        """The shipped file of ``split`` (``FileNotFoundError`` naming the task when the
        task ships none)."""
        if self.task_files is None:
            raise FileNotFoundError(f"task {self.task_id!r} registers no task files")
        path = Path(self.task_files.format(split=split))
        return path if path.is_absolute() else asset_path(self.task_id, str(path))


def _check_task(task_id: str, spec: TaskSpec) -> None:
    if "-v" in task_id or ":" in task_id:
        raise ValueError(
            f"task id {task_id!r} looks like a Gymnasium id; a task id is a short name (db)"
        )
    taken = [other for other, known in ENVIRONMENTS.items() if known.env_id == spec.env_id]
    if taken and taken != [task_id]:
        raise ValueError(f"task {task_id!r}: Gymnasium id {spec.env_id} is task {taken[0]!r}'s")


ENVIRONMENTS: Registry[TaskSpec] = Registry("task", check=_check_task)
"""``info["task_id"]`` -> its :class:`TaskSpec`, in registration order."""


def register_task(
    task_id: str,
    *,
    env_id: str,
    env: str | Callable[..., gym.Env[Any, Any]],
    task_files: str | None = None,
    generator: str | None = None,
    expert: bool = True,
    blind_answer: Mapping[str, Any] | None = None,
    replace: bool = False,
) -> TaskSpec:
    """Register the task ``task_id`` (the fields are :class:`TaskSpec`'s) and its
    Gymnasium id; return its spec. A config's ``tasks`` and ``eval.tasks``, the vector
    env and ``gym.make`` then know it. ``ValueError`` for a task id already registered
    (``replace=True`` replaces it) or a Gymnasium id another task has."""
    spec = TaskSpec(env_id, env, task_files, generator, expert, blind_answer, task_id)
    ENVIRONMENTS.register(task_id, spec, replace=replace)
    if replace or env_id not in gym.registry:
        gym.register(id=env_id, entry_point=env, disable_env_checker=True)
    return spec


def unregister_task(task_id: str) -> TaskSpec:
    """Remove a task and its Gymnasium id (a test's clean-up); return its spec."""
    spec = ENVIRONMENTS.unregister(task_id)
    gym.registry.pop(spec.env_id, None)
    return spec


def env_id_for(task_id: str) -> str:
    """The id ``gym.make`` takes for a task (``"db"`` -> ``"AgentBench-DB-v0"``;
    :attr:`TaskSpec.make_id`); ``KeyError`` naming the tasks for an unknown one."""
    spec = ENVIRONMENTS.get(task_id)
    if spec is None:
        raise KeyError(f"unknown task {task_id!r}; available: {', '.join(ENVIRONMENTS)}")
    return spec.make_id


def register_environments() -> None:
    """Register the Gymnasium id of every task in :data:`ENVIRONMENTS` that Gymnasium's
    registry lacks (idempotent)."""
    for spec in ENVIRONMENTS.values():
        if spec.env_id not in gym.registry:
            gym.register(id=spec.env_id, entry_point=spec.env, disable_env_checker=True)


register_task(
    "os",
    env_id="AgentBench-OS-v0",
    env="agentgym_eppo.environments.os.env:OSEnv",
    task_files="{split}.jsonl.gz",
    generator="agentgym_eppo.environments.os.fresh",
    blind_answer={"name": "answer_action", "arguments": {"answer": ""}},
)
register_task(
    "db",
    env_id="AgentBench-DB-v0",
    env="agentgym_eppo.environments.db.env:DBEnv",
    task_files="{split}.jsonl.gz",
    generator="agentgym_eppo.environments.db.fresh",
    blind_answer={"name": "commit_final_answer", "arguments": {"answers": []}},
)
register_task(
    "kg",
    env_id="AgentBench-KG-v0",
    env="agentgym_eppo.environments.kg.env:KGEnv",
    task_files="{split}.jsonl.gz",
    generator="agentgym_eppo.environments.kg.fresh",
    blind_answer={"name": "final_answer", "arguments": {"variable": "#0"}},
)
register_task(
    "alfworld",
    env_id="AgentBench-ALFWorld-v0",
    env="agentgym_eppo.environments.alfworld.env:ALFWorldEnv",
    task_files="{split}.jsonl.gz",
    generator="agentgym_eppo.environments.alfworld.fresh",
)
register_task(
    "webshop",
    env_id="AgentBench-WebShop-v0",
    env="agentgym_eppo.environments.webshop.env:WebShopEnv",
    task_files="goals_{split}.jsonl.gz",
    generator="agentgym_eppo.environments.webshop.fresh",
)

TASK_IDS: tuple[str, ...] = tuple(ENVIRONMENTS)
"""The tasks this package registers (AgentBench's five, in its order): what a run
trains on by default. A task registered later runs where a config names it."""
