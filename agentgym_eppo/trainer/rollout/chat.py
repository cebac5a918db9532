"""Episodes as token sequences: the chat template's pieces, assembled token-in/token-out.

A multi-turn episode is one growing token sequence. The prompt (system turn with the
tool schemas, the task as the user turn, the opening of the assistant turn) comes from
the tokenizer's chat template; after that, the model's sampled tokens are appended as
they are (loss mask 1) and never re-tokenized, and every environment reply is appended
as the template renders a ``tool`` message (loss mask 0). SFT builds its sequences with
the same :class:`Transcript`, so warm start and RL see the same token layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentgym_eppo.core import FunctionCall
from agentgym_eppo.wrappers.prompts import agentbench_messages

if TYPE_CHECKING:  # only annotations: the CLI reads PROMPT_STYLES without loading transformers
    from transformers import PreTrainedTokenizerBase

# What the template writes between an assistant turn's <|im_end|> and the next turn's
# text: see tiny_model.CHAT_TEMPLATE (and Qwen2.5's template, which it follows).
TOOL_TURN = "\n<|im_start|>user\n<tool_response>\n{observation}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


PROMPT_STYLES = ("full", "compact")


def compact_system_prompt(task_id: str, tools: Sequence[Mapping[str, Any]] | None) -> str:
    """A one-line system turn: the task family and its tools' signatures, no prose."""
    signatures = []
    for tool in tools or []:
        function = tool.get("function", tool)
        arguments = ", ".join(function.get("parameters", {}).get("properties", {}))
        signatures.append(f"{function['name']}({arguments})")
    return f"Task: {task_id}. Tools: {'; '.join(signatures)}. Answer with one <tool_call>."


def prompt_token_ids(
    tokenizer: PreTrainedTokenizerBase,
    system_prompt: str,
    task_text: str,
    tools: Sequence[Mapping[str, Any]] | None,
    style: str = "full",
    task_id: str = "",
) -> list[int]:
    """The episode's prompt: system (+ tools) and user turns, then ``<|im_start|>assistant\\n``.

    ``style="full"`` is the environment's own system prompt and the tools' JSON schemas
    (what a pretrained model needs); ``"compact"`` replaces both with one line naming the
    task and the tools' signatures (:func:`compact_system_prompt`): a model trained from
    scratch learns the tools from its SFT data, and a prompt 3-5x shorter makes every
    CPU step 3-5x cheaper. SFT, RL and evaluation must use the same style.
    """
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt style must be one of {PROMPT_STYLES}, got {style!r}")
    if style == "compact":
        system_prompt, tools = compact_system_prompt(task_id, tools), None
    if tools and not template_renders_tools(tokenizer):
        system_prompt, tools = _tools_in_system_prompt(system_prompt, tools), None
    messages = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": task_text},
    ]
    ids: Any = tokenizer.apply_chat_template(
        messages,
        tools=[dict(tool) for tool in tools] if tools else None,
        add_generation_prompt=True,
        tokenize=True,
    )
    if isinstance(ids, Mapping):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids]


_PROBE_TOOL = "agentgym_probe_tool"


def template_renders_tools(tokenizer: PreTrainedTokenizerBase) -> bool:
    """Whether the tokenizer's chat template writes a ``tools`` list into the prompt.

    A template without a tools section (SmolLM2's plain ChatML) drops the list without
    a word; :func:`prompt_token_ids` then writes the tools into the system turn itself,
    in the Hermes/Qwen form, so the model reads the same schemas and call syntax.
    """
    probe = {"type": "function", "function": {"name": _PROBE_TOOL, "parameters": {}}}
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "-"}], tools=[probe], tokenize=False
    )
    return _PROBE_TOOL in str(text)


def _tools_in_system_prompt(system_prompt: str, tools: Sequence[Mapping[str, Any]]) -> str:
    info = {"system_prompt": system_prompt, "tools": [dict(tool) for tool in tools]}
    return str(agentbench_messages("", info, fmt="hermes")[0]["content"])


def action_text(action: Any) -> str:
    """An expert action as the assistant would write it (Hermes ``<tool_call>`` block)."""
    if isinstance(action, str):
        return action
    if isinstance(action, Mapping) and "name" in action:
        return FunctionCall(str(action["name"]), action.get("arguments", {})).to_hermes()
    raise TypeError(f"cannot render expert action {action!r} as assistant text")


@dataclass
class Transcript:
    """One episode's tokens and loss mask (1 = written by the model)."""

    tokens: list[int]
    mask: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.mask:
            self.mask = [0] * len(self.tokens)
        self.prompt_length = len(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def add_generated(self, ids: Sequence[int]) -> None:
        self.tokens.extend(int(i) for i in ids)
        self.mask.extend([1] * len(ids))

    def add_template(self, ids: Sequence[int]) -> None:
        self.tokens.extend(int(i) for i in ids)
        self.mask.extend([0] * len(ids))

    @property
    def generated_tokens(self) -> int:
        return sum(self.mask)


def observation_token_ids(tokenizer: PreTrainedTokenizerBase, observation: str) -> list[int]:
    """The tokens of an environment reply and the next assistant turn's opening."""
    return list(
        tokenizer.encode(TOOL_TURN.format(observation=observation), add_special_tokens=False)
    )
