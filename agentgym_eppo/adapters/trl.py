"""TRL ``GRPOTrainer`` adapter: ``environment_factory`` classes and a multi-task dataset.

TRL (1.16+) drives an environment through a class whose public methods are the tools
(their signatures and Google-style docstrings become the tool schemas), a
``reset(**row)`` that returns the text appended to the prompt, and a ``get_reward()``
that scores the finished rollout. :func:`trl_environment_class` builds that class for
any of our envs, one method per tool, so that

>>> factories = trl_environment_factories(["db", "kg"])
>>> dataset = build_multitask_dataset(["db", "kg"], rows=256)
>>> GRPOTrainer(model, args=..., train_dataset=dataset, environment_factory=factories)  # doctest: +SKIP

trains on both tasks, interleaved as in AgentRL (each row names its ``environment`` and
``task_index``). A rollout that stops without finishing the task is ended with
``agent_invalid_action`` and the abort penalty, as AgentBench scores a reply with no
valid call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentgym_eppo.core import ToolSpec
from agentgym_eppo.vector.sampling import interleaved_schedule
from agentgym_eppo.wrappers.session import EpisodeSession, make_env

_JSON_TO_PYTHON: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


class TRLEnvironment:
    """Base of the generated classes: one :class:`EpisodeSession` per instance."""

    task: str = ""
    env_kwargs: Mapping[str, Any] = {}
    tokenizer: Any = None  # the policy's: its special tokens are escaped in tool outputs

    def __init__(self) -> None:
        self._session = EpisodeSession(self.task, self.env_kwargs, tokenizer=self.tokenizer)

    def reset(self, **row: Any) -> str:
        """Start the row's instance (``task_index`` or ``sample_id``); returns the task text."""
        index = row.get("task_index")
        return self._session.start(
            index=int(index) if index is not None else None, sample_id=row.get("sample_id")
        )

    def get_reward(self) -> float:
        """The rollout's return (the abort penalty if the task was left unfinished)."""
        return self._session.final_reward()

    def _close(self) -> None:
        self._session.close()

    @property
    def _info(self) -> dict[str, Any]:
        return self._session.info


def _tool_method(spec: ToolSpec) -> Callable[..., str]:
    properties: Mapping[str, Any] = spec.parameters.get("properties", {})

    def tool(self: TRLEnvironment, **arguments: Any) -> str:
        return self._session.call(spec.name, arguments)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for name, schema in properties.items():
        kind = _JSON_TO_PYTHON.get(str(schema.get("type", "string")), str)
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=kind)
        )
        annotations[name] = kind
    annotations["return"] = str
    tool.__name__ = tool.__qualname__ = spec.name
    tool.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = annotations
    args = "\n".join(
        f"    {name}: {str(schema.get('description') or name).strip()}"
        for name, schema in properties.items()
    )
    description = spec.description.strip() or spec.name
    tool.__doc__ = (
        f"{description}\n\nArgs:\n{args}\n\nReturns:\n    The tool's output.\n"
        if args
        else (f"{description}\n\nReturns:\n    The tool's output.\n")
    )
    return tool


def trl_environment_class(
    task: str, env_kwargs: Mapping[str, Any] | None = None, *, tokenizer: Any = None
) -> type[TRLEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)`` over ``task`` (a task id such
    as ``"db"`` or a Gymnasium id); ``env_kwargs`` go to ``gym.make``. ``tokenizer``: the
    trainer's ``processing_class``, whose special tokens never reach it from the
    environment's text (escaped); without it, the common control-token forms are."""
    probe = make_env(task, env_kwargs)
    try:
        tools: Sequence[ToolSpec] = probe.unwrapped.tools  # type: ignore[attr-defined]
        task_id = str(probe.unwrapped.task_id)  # type: ignore[attr-defined]
    finally:
        probe.close()
    reserved = {"reset", "get_reward"} & {spec.name for spec in tools}
    if reserved:
        raise ValueError(f"{task}: tool names {sorted(reserved)} clash with TRL's reserved methods")
    namespace: dict[str, Any] = {
        "task": task,
        "env_kwargs": dict(env_kwargs or {}),
        "tokenizer": tokenizer,
    }
    namespace.update({spec.name: _tool_method(spec) for spec in tools})
    name = "".join(part.capitalize() for part in task_id.split("_")) + "Environment"
    return type(name, (TRLEnvironment,), namespace)


def trl_environment_factories(
    tasks: Sequence[str],
    env_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    tokenizer: Any = None,
) -> dict[str, type[TRLEnvironment]]:
    """``{task: class}`` for a multi-task ``environment_factory`` (rows name their task)."""
    env_kwargs = env_kwargs or {}
    return {
        task: trl_environment_class(task, env_kwargs.get(task), tokenizer=tokenizer)
        for task in tasks
    }


def build_multitask_dataset(
    tasks: Sequence[str],
    rows: int | None = None,
    *,
    split: str = "train",
    seed: int = 0,
    env_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
) -> Any:
    """A ``datasets.Dataset`` of AgentRL-interleaved rows for a multi-task GRPO run.

    Columns: ``prompt`` (the task's system prompt and an empty user turn, which
    ``reset`` fills with the task text), ``environment`` (the task, as in ``tasks``),
    ``task_index`` (the instance). Tasks alternate row by row, each task's instances
    shuffled and repeated until every task has as many rows as the largest
    (:func:`~agentgym_eppo.vector.interleaved_schedule`); ``rows`` cuts or extends it.
    """
    from datasets import Dataset

    env_kwargs = env_kwargs or {}
    sizes: dict[str, int] = {}
    prompts: dict[str, str] = {}
    for task in tasks:
        env = make_env(task, {"split": split, **dict(env_kwargs.get(task, {}))})
        try:
            sizes[task] = int(env.unwrapped.num_tasks)  # type: ignore[attr-defined]
            prompts[task] = str(env.unwrapped.system_prompt)  # type: ignore[attr-defined]
        finally:
            env.close()
    per_task = None if rows is None else -(-rows // len(tasks))
    schedule = interleaved_schedule(sizes, seed, length=per_task)
    if rows is not None:
        schedule = schedule[:rows]
    return Dataset.from_list(
        [
            {
                "prompt": [
                    {"role": "system", "content": prompts[task]},
                    {"role": "user", "content": ""},
                ],
                "environment": task,
                "task_index": index,
            }
            for task, index in schedule
        ]
    )
