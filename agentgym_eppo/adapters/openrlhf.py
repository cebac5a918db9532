"""OpenRLHF adapter: an agent instance and executor for ``--agent_func_path``.

OpenRLHF's multi-turn agent executor (``openrlhf.utils.agent``) builds one
``AgentInstance`` per prompt with no arguments, calls ``await reset({"observation":
prompt, "label": label})`` and then ``await step({"action_text": ..., ...})`` after each
generation until ``done``. Each step returns ``rewards``/``scores`` (tensors),
``environment_feedback`` (text appended to the token stream) and ``done``.

:class:`AgentGymAgentInstance` reads the task from the sample's ``label`` (JSON
``{"task": "db", "task_index": 3}``, or ``"db:3"``), and wraps each tool output as a
ChatML tool response followed by the next assistant header, so the model continues
in its own chat format. Point OpenRLHF at this file (``--agent_func_path
path/to/agentgym_eppo/adapters/openrlhf.py``): it defines ``AgentExecutor``.

OpenRLHF encodes that feedback with special tokens parsed (the template's
``<|im_start|>`` must be one), so the tool output is escaped for the tokenizer the
executor is given (``hf_tokenizer``): none of its special tokens can come from the
environment's text. OpenRLHF builds each instance with no arguments, so the executor
hands its tokenizer over through a context variable, local to the episode's task.

Importing this module needs OpenRLHF's ``openrlhf.utils.agent`` (tested with 0.11.2).
OpenRLHF's own requirements include flash-attn, which builds from source against CUDA;
where that cannot build, ``pip install --no-deps openrlhf`` plus ``pylatexenc`` (with
torch and transformers present) is enough for this module and for OpenRLHF's
``MultiTurnAgentExecutor``, which the tests run.
"""

from __future__ import annotations

import contextvars
import json
from typing import Any

from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

from agentgym_eppo.wrappers.session import EpisodeSession

FEEDBACK_TEMPLATE = (
    "\n<|im_start|>user\n<tool_response>\n{observation}\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
)
"""How a tool result continues a ChatML conversation (Qwen2.5's tool-response turn)."""

_EXECUTOR_TOKENIZER: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "agentgym_openrlhf_tokenizer", default=None
)
"""The tokenizer of the :meth:`AgentExecutor.execute` running in this task."""


def parse_label(label: Any) -> tuple[str, int | None, str | None]:
    """``(task, task_index, sample_id)`` from a JSON label or ``"task:index"``."""
    if isinstance(label, str) and label.lstrip().startswith("{"):
        label = json.loads(label)
    if isinstance(label, dict):
        index = label.get("task_index")
        return str(label["task"]), int(index) if index is not None else None, label.get("sample_id")
    task, _, index = str(label).rpartition(":")
    if not task or not index.isdigit():
        raise ValueError(
            f"label must be JSON {{'task', 'task_index'}} or 'task:index', got {label!r}"
        )
    return task, int(index), None


def _tensor(value: float) -> Any:
    import torch

    return torch.tensor(value)


class AgentGymAgentInstance(AgentInstanceBase):
    """One episode per prompt; the label names the task instance.

    ``tokenizer``: the one that encodes the feedback; by default the running
    :class:`AgentExecutor`'s (none outside one: the common control-token forms only).
    """

    feedback_template = FEEDBACK_TEMPLATE

    def __init__(self, *args: Any, tokenizer: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tokenizer = tokenizer if tokenizer is not None else _EXECUTOR_TOKENIZER.get()
        self.session: EpisodeSession | None = None

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        task, index, sample_id = parse_label(states["label"])
        self.session = EpisodeSession(task, tokenizer=self.tokenizer)
        self.session.start(index=index, sample_id=sample_id)
        return {"observation": states["observation"]}

    async def step(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if self.session is None:
            raise RuntimeError("reset() must come before step()")
        observation, reward, done, info = self.session.act(states["action_text"])
        if done:
            self.session.close()
        return {
            "rewards": _tensor(reward),
            "scores": _tensor(self.session.reward),
            "environment_feedback": ""
            if done
            else self.feedback_template.format(observation=observation),
            "done": done,
            "sampling_params": states.get("sampling_params"),
            "extra_logs": {
                "status": info.get("status"),
                "success": float(bool(info.get("success", False))),
            },
        }


class AgentExecutor(MultiTurnAgentExecutor):
    """What OpenRLHF loads from ``--agent_func_path``: the multi-turn executor over our envs."""

    def __init__(self) -> None:
        super().__init__(AgentGymAgentInstance)

    async def execute(
        self,
        prompt: Any,
        label: Any,
        sampling_params: Any,
        max_length: int,
        hf_tokenizer: Any,
        llm_engine: Any,
        images: Any = None,
    ) -> Any:
        """OpenRLHF's multi-turn episode, its instance escaping for ``hf_tokenizer``."""
        token = _EXECUTOR_TOKENIZER.set(hf_tokenizer)
        try:
            return await super().execute(
                prompt, label, sampling_params, max_length, hf_tokenizer, llm_engine, images
            )
        finally:
            _EXECUTOR_TOKENIZER.reset(token)
