"""AgentBench's conversation layout: the task's instructions, then the task as the user.

Every environment carries AgentBench's own instructions as ``info["system_prompt"]``
and the task text as its first observation. In AgentBench's function-calling mode the
tools travel beside the messages (an OpenAI ``tools`` list, rendered by the chat
template); in its older text mode they are described in the prompt and the model
answers ``Action: name(args)``. :func:`agentbench_messages` builds either opening.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .formats import ToolCallFormat, get_format


def agentbench_messages(
    observation: str,
    info: Mapping[str, Any],
    fmt: str | ToolCallFormat | None = None,
) -> list[dict[str, Any]]:
    """The opening messages of an episode from its reset ``observation`` and ``info``.

    ``fmt=None`` (function calling): ``[system, user]``; pass ``info["tools"]`` to the
    chat template or API. With a text format (``"react"``, ``"hermes"``) the system
    message also lists the tools and says how to call them.
    """
    system = str(info.get("system_prompt", ""))
    if fmt is not None:
        system = f"{system}\n\n{get_format(fmt).instructions(info.get('tools', []))}".strip()
    return [{"role": "system", "content": system}, {"role": "user", "content": observation}]
