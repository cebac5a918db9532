"""Episodes as token sequences: the chat template's pieces, assembled token-in/token-out.

A multi-turn episode is one growing token sequence. The prompt (system turn with the
tool schemas, the task as the user turn, the opening of the assistant turn) comes from
the tokenizer's chat template; after that, the model's sampled tokens are appended as
they are (loss mask 1) and never re-tokenized, and every environment reply is appended
as the template renders a ``tool`` message (loss mask 0). SFT builds its sequences with
the same :class:`Transcript`, so warm start and RL see the same token layout.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

# What the template writes between an assistant turn's <|im_end|> and the next turn's
# text: see tiny_model.CHAT_TEMPLATE (and Qwen2.5's template, which it follows).
TOOL_TURN = "\n<|im_start|>user\n<tool_response>\n{observation}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def prompt_token_ids(
    tokenizer: PreTrainedTokenizerBase,
    system_prompt: str,
    task_text: str,
    tools: Sequence[Mapping[str, Any]] | None,
) -> list[int]:
    """The episode's prompt: system (+ tools) and user turns, then ``<|im_start|>assistant\\n``."""
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


def action_text(action: Any) -> str:
    """An expert action as the assistant would write it (Hermes ``<tool_call>`` block)."""
    if isinstance(action, str):
        return action
    if isinstance(action, Mapping) and "name" in action:
        call = {"name": action["name"], "arguments": action.get("arguments", {})}
        return "<tool_call>\n" + json.dumps(call, ensure_ascii=False) + "\n</tool_call>"
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
