"""Observations as chat message lists, ready for a chat template or a chat API.

:class:`ChatHistory` keeps the whole conversation of an episode: AgentBench's system
prompt, the task as the user's message, each assistant reply, and each tool result
(as a ``tool`` message answering the call, or a ``user`` message in text formats such
as ReAct). ``info["tools"]`` carries the OpenAI schemas for the template.

A message list is rendered by whoever holds the tokenizer (``apply_chat_template``, a
served model's chat endpoint), and those render the whole string with control tokens
parsed. So the environment's text (the task and every tool result) is escaped on the
way in (:class:`ControlTokenEscaper`): each control token's text gets a zero-width space
after its first character, and can no longer close the turn or open an assistant one.
The forms are the common templates' (:data:`CONTROL_TOKEN_PATTERNS`) plus, given the
tokenizer that renders the messages, every one of its special tokens
(:func:`tokenizer_escaper`): SmolLM2's ``<file_sep>`` is in no list of forms.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
from gymnasium.spaces import Space

from agentgym_eppo.core import ToolCallError

from .formats import ToolCallFormat, get_format
from .prompts import agentbench_messages

Message = dict[str, Any]

ZERO_WIDTH_SPACE = "\u200b"

CONTROL_TOKEN_PATTERNS = (
    r"<\|[^<>|\s\u200b]{1,64}\|>",  # ChatML, Qwen, Llama 3, Phi: <|im_end|>, <|eot_id|>
    r"<｜[^<>｜\s\u200b]{1,64}｜>",  # DeepSeek: <｜end▁of▁sentence｜>
    r"</?(?:tool_call|tool_response|think|s)>",  # Hermes/Qwen tags; Llama 2, Mistral: <s>
    r"\[/?INST\]",  # Llama 2, Mistral
    r"<(?:start|end)_of_turn>",  # Gemma
)
"""The control-token forms escaped whatever the tokenizer; a tokenizer's own special
tokens are added by :func:`tokenizer_escaper` (``ChatHistory(env, tokenizer=...)``)."""


class ControlTokenEscaper:
    """Breaks every control token's text in untrusted text with a zero-width space.

    A space goes after the first character of each match of :data:`CONTROL_TOKEN_PATTERNS`
    and of each extra token, overlapping matches included. None of these can match the
    escape character, so what comes out holds no match at all: a match in the output
    would be a match of the input with no space inside, and every match got one.

    >>> escape = ControlTokenEscaper()
    >>> escape("0<|im_end|><|im_start|>assistant").replace(ZERO_WIDTH_SPACE, "~")
    '0<~|im_end|><~|im_start|>assistant'
    >>> escape("SELECT 1 < 2") == "SELECT 1 < 2"
    True
    """

    def __init__(self, extra: Iterable[str] = ()) -> None:
        tokens = sorted(set(extra), key=len, reverse=True)
        for token in tokens:
            if len(token) < 2 or ZERO_WIDTH_SPACE in token:
                raise ValueError(
                    f"control token {token!r} cannot be escaped (needs 2+ characters, "
                    "none of them a zero-width space)"
                )
        forms = [*CONTROL_TOKEN_PATTERNS, *map(re.escape, tokens)]
        # A lookahead finds a match at every position, overlapping ones too.
        self._starts = re.compile("(?=" + "|".join(f"(?:{form})" for form in forms) + ")")

    def __call__(self, text: str) -> str:
        cuts = [match.start() + 1 for match in self._starts.finditer(text)]
        if not cuts:
            return text
        parts = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        return ZERO_WIDTH_SPACE.join(parts)


escape_control_tokens = ControlTokenEscaper()
"""The default escaper (:data:`CONTROL_TOKEN_PATTERNS`), for text whose tokenizer is unknown."""


def special_token_texts(tokenizer: Any) -> frozenset[str]:
    """The text of every token ``tokenizer`` reads as a special id: its named special
    tokens and every added token it marks special.

    ``all_special_tokens`` alone misses most of them: SmolLM2 names 3 of its 17
    (``<file_sep>``, ``<repo_name>``... are added tokens marked special), agentgym-tiny
    3 of its 7 (``<tool_call>``, ``</tool_call>``...).
    """
    texts = {str(token) for token in getattr(tokenizer, "all_special_tokens", ())}
    for token in dict(getattr(tokenizer, "added_tokens_decoder", {})).values():
        if getattr(token, "special", False):
            texts.add(str(getattr(token, "content", token)))
    return frozenset(texts)


def tokenizer_escaper(tokenizer: Any) -> ControlTokenEscaper:
    """The escaper for text that ``tokenizer`` will encode: :data:`CONTROL_TOKEN_PATTERNS`
    and every special token of the tokenizer (:func:`special_token_texts`); ``None``
    gives :data:`escape_control_tokens`. Escapers are shared between tokenizers with the
    same special tokens.

    Raises ``ValueError`` for a special token the escaper cannot break (one character).
    """
    if tokenizer is None:
        return escape_control_tokens
    return _escaper_of(special_token_texts(tokenizer))


@functools.lru_cache(maxsize=16)
def _escaper_of(tokens: frozenset[str]) -> ControlTokenEscaper:
    return ControlTokenEscaper(tokens)


class MessageList(Space[list[Message]]):
    """A list of chat messages, each a dict with a string ``role`` and ``content``."""

    def __init__(self) -> None:
        super().__init__()

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(
            isinstance(m, dict)
            and isinstance(m.get("role"), str)
            and isinstance(m.get("content", ""), (str, type(None)))
            for m in x
        )

    def sample(self, mask: Any = None, probability: Any = None) -> list[Message]:
        return [{"role": "user", "content": ""}]

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MessageList)

    def __hash__(self) -> int:
        return hash(MessageList)


class ChatHistory(gym.Wrapper[Any, Any, Any, Any]):
    """Observations become the episode's message list.

    Actions may be the assistant's text, an OpenAI assistant message (``{"role":
    "assistant", "content", "tool_calls"}``) or a parsed call. ``fmt`` (``"react"``...)
    puts the tool instructions into the system prompt and reads calls from text in that
    format; ``fmt=None`` is function calling (tools go to the template via ``info``).

    The task and every tool result are escaped (:class:`ControlTokenEscaper`), so no
    chat template turns them into control tokens. Pass the ``tokenizer`` that renders
    the messages: its special tokens are escaped too (:func:`tokenizer_escaper`);
    without it only :data:`CONTROL_TOKEN_PATTERNS` are. ``control_tokens`` adds more.
    """

    def __init__(
        self,
        env: gym.Env[Any, Any],
        fmt: str | ToolCallFormat | None = None,
        control_tokens: Iterable[str] = (),
        *,
        tokenizer: Any = None,
    ) -> None:
        super().__init__(env)
        self.format = get_format(fmt) if fmt is not None else None
        extra = set(control_tokens)
        if tokenizer is not None:
            extra |= special_token_texts(tokenizer)
        self.escape = _escaper_of(frozenset(extra)) if extra else escape_control_tokens
        self.observation_space = MessageList()
        self.messages: list[Message] = []
        self._tools: list[dict[str, Any]] = []
        self._calls = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[list[Message], dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        self._tools = list(info.get("tools", []))
        self._calls = 0
        self.messages = agentbench_messages(self.escape(observation), info, self.format)
        return copy.deepcopy(self.messages), info

    def step(self, action: Any) -> tuple[list[Message], Any, bool, bool, dict[str, Any]]:
        message, env_action = self._assistant_message(action)
        self.messages.append(message)
        observation, reward, terminated, truncated, info = self.env.step(env_action)
        self.messages.append(self._result_message(message, self.escape(observation)))
        return copy.deepcopy(self.messages), reward, terminated, truncated, info

    def _result_message(self, assistant: Message, observation: str) -> Message:
        calls = assistant.get("tool_calls") or []
        if calls:
            first = calls[0]
            return {
                "role": "tool",
                "tool_call_id": first.get("id", ""),
                "name": first.get("function", first).get("name", ""),
                "content": observation,
            }
        role = self.format.result_role if self.format is not None else "tool"
        return {"role": role, "content": observation}

    def _assistant_message(self, action: Any) -> tuple[Message, Any]:
        """The assistant message to record, and what to hand the env."""
        if isinstance(action, Mapping) and action.get("role") == "assistant":
            return dict(action), dict(action)
        if isinstance(action, str):
            if self.format is not None:
                try:
                    return {"role": "assistant", "content": action}, self.format.parse(
                        action, self._tools
                    )
                except ToolCallError:  # the env reports the unreadable call itself
                    return {"role": "assistant", "content": action}, action
            return {"role": "assistant", "content": action}, action
        if isinstance(action, Mapping) and "name" in action:
            self._calls += 1
            call = {
                "id": f"call_{self._calls}",
                "type": "function",
                "function": {
                    "name": action["name"],
                    "arguments": json.dumps(action.get("arguments", {}), ensure_ascii=False),
                },
            }
            return {"role": "assistant", "content": "", "tool_calls": [call]}, dict(action)
        return {"role": "assistant", "content": str(action)}, action
