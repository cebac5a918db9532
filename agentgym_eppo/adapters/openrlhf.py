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

Without OpenRLHF installed (it is not a dependency: it pins its own torch and vLLM)
the classes derive from stand-ins with the same interface.
"""

from __future__ import annotations

import json
from typing import Any

from agentgym_eppo.wrappers.session import EpisodeSession

try:
    from openrlhf.utils.agent import AgentInstanceBase as _InstanceBase
    from openrlhf.utils.agent import MultiTurnAgentExecutor as _ExecutorBase
except ImportError:

    class _InstanceBase:  # type: ignore[no-redef]
        """Stand-in for ``openrlhf.utils.agent.AgentInstanceBase``."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

    class _ExecutorBase:  # type: ignore[no-redef]
        """Stand-in for ``openrlhf.utils.agent.MultiTurnAgentExecutor``."""

        def __init__(self, agent_instance_cls: type) -> None:
            self.agent_instance_cls = agent_instance_cls


FEEDBACK_TEMPLATE = (
    "\n<|im_start|>user\n<tool_response>\n{observation}\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
)
"""How a tool result continues a ChatML conversation (Qwen2.5's tool-response turn)."""


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


class AgentGymAgentInstance(_InstanceBase):
    """One episode per prompt; the label names the task instance."""

    feedback_template = FEEDBACK_TEMPLATE

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session: EpisodeSession | None = None

    async def reset(self, states: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        task, index, sample_id = parse_label(states["label"])
        self.session = EpisodeSession(task)
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


class AgentExecutor(_ExecutorBase):
    """What OpenRLHF loads from ``--agent_func_path``: the multi-turn executor over our envs."""

    def __init__(self) -> None:
        super().__init__(AgentGymAgentInstance)
