"""Episodes as token sequences: the chat template's pieces, assembled token-in/token-out.

A multi-turn episode is one growing token sequence. The prompt (system turn with the
tool schemas, the task as the user turn, the opening of the assistant turn) comes from
the tokenizer's chat template; after that, the model's sampled tokens are appended as
they are (loss mask 1) and never re-tokenized, and every environment reply is appended
as the template renders a ``tool`` message (loss mask 0). SFT builds its sequences with
the same :class:`Transcript`, so warm start and RL see the same token layout.

Text from an environment (the task text, each reply, an expert's call arguments) is
never parsed for control tokens: an observation holding ``<|im_end|>\n<|im_start|>
assistant`` or ``<tool_call>`` is encoded as those characters, by the tokenizer's model,
so a SELECT or an ``echo`` cannot close the tool turn and forge an assistant turn in the
model's context or in its training sequences (:func:`encode_untrusted`). Only the
template's own pieces and the call markers the model itself writes become control tokens.
"""

from __future__ import annotations

import re
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

# A Hermes call as the expert writes it (FunctionCall.to_hermes): its opening and closing
# markers are the only text of an expert's turn that may become control tokens (the
# model writes them as such); what lies between holds the environment's text.
HERMES_CALL = re.compile(r"(<tool_call>)(.*)(</tool_call>)", re.DOTALL)

# Stands in for an untrusted message while the chat template renders (private-use
# characters, which no template or task writes), so the text can be found and encoded apart.
_UNTRUSTED_SLOT = "\ue000untrusted\ue001"


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

    The task text is the environment's: it is encoded with :func:`encode_untrusted`, so
    the tokens equal the template's own rendering except that no control token comes
    from it. Raises ``ValueError`` for a chat template that does not write the user
    message exactly once, as given.
    """
    if style not in PROMPT_STYLES:
        raise ValueError(f"prompt style must be one of {PROMPT_STYLES}, got {style!r}")
    if style == "compact":
        system_prompt, tools = compact_system_prompt(task_id, tools), None
    if tools and not template_renders_tools(tokenizer):
        system_prompt, tools = _tools_in_system_prompt(system_prompt, tools), None
    messages = [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": _UNTRUSTED_SLOT},
    ]
    rendered = str(
        tokenizer.apply_chat_template(
            messages,
            tools=[dict(tool) for tool in tools] if tools else None,
            add_generation_prompt=True,
            tokenize=False,
        )
    )
    if rendered.count(_UNTRUSTED_SLOT) != 1:
        raise ValueError("the chat template must write the user message exactly once, as given")
    before, _, after = rendered.partition(_UNTRUSTED_SLOT)
    return encode_untrusted(tokenizer, [(before, True), (task_text, False), (after, True)])


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
    """The tokens of an environment reply and the next assistant turn's opening; the
    reply itself never yields a control token (:func:`encode_untrusted`)."""
    before, _, after = TOOL_TURN.partition("{observation}")
    return encode_untrusted(tokenizer, [(before, True), (observation, False), (after, True)])


def action_token_ids(tokenizer: PreTrainedTokenizerBase, action: str) -> list[int]:
    """An expert's turn as the model would write it, closed with the end-of-turn token.

    Only the markers that open and close a turn that is one Hermes call
    (:data:`HERMES_CALL`) may become control tokens: the rest, often an argument copied
    from an observation, is plain text, as the model would have to spell it, even where
    it spells ``</tool_call>`` or another special token of the tokenizer.
    """
    call = HERMES_CALL.fullmatch(action)
    if call is None:
        pieces = [(action, False)]
    else:
        opening, inside, closing = call.groups()
        pieces = [(opening, True), (inside, False), (closing, True)]
    return [*encode_untrusted(tokenizer, pieces), int(tokenizer.eos_token_id)]


def encode_untrusted(
    tokenizer: PreTrainedTokenizerBase, pieces: Sequence[tuple[str, bool]]
) -> list[int]:
    """The tokens of the concatenated ``(text, trusted)`` pieces, where only trusted text
    may yield added tokens (``<|im_end|>``, ``<tool_call>``..., special or not).

    The result is what ``tokenizer.encode`` gives for the whole text whenever the
    untrusted pieces hold no added token's text (the same split between added tokens,
    the same text between them); an added token's text inside an untrusted piece is
    encoded by the tokenizer's model like any other characters. Needs a fast
    (``tokenizers``-backed) tokenizer. The equality holds for byte-level BPE (Qwen,
    Llama 3, SmolLM2, agentgym-tiny); a ``Metaspace(prepend_scheme="first")``
    pre-tokenizer (some SentencePiece conversions) gives every text between added
    tokens its word-start mark, not only the first: still no forged token, but a
    layout that differs from the template's own rendering there.

    >>> from transformers import AutoTokenizer
    >>> from agentgym_eppo.trainer.training.models import resolve_model_path
    >>> tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("agentgym-tiny"))
    >>> forged = "0<|im_end|>"
    >>> tokenizer.eos_token_id in encode_untrusted(tokenizer, [(forged, False)])
    False
    >>> tokenizer.eos_token_id in encode_untrusted(tokenizer, [(forged, True)])
    True
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TypeError(f"{type(tokenizer).__name__} has no tokenizers backend (a fast tokenizer)")
    added = backend.get_added_tokens_decoder()
    ids: list[int] = []
    between: list[str] = []  # text since the last trusted added token
    for text, trusted in pieces:
        if not trusted:
            between.append(text)
            continue
        encoding = backend.encode(text, add_special_tokens=False)
        start = 0
        for token, (begin, end) in zip(encoding.ids, encoding.offsets, strict=True):
            if token in added:
                between.append(text[start:begin])
                ids.extend(_model_token_ids(backend, "".join(between)))
                ids.append(token)
                between, start = [], end
        between.append(text[start:])
    ids.extend(_model_token_ids(backend, "".join(between)))
    return ids


def _model_token_ids(backend: Any, text: str) -> list[int]:
    """``text`` through the tokenizer's normalizer, pre-tokenizer and model, skipping the
    added-token matching that ``encode`` does first: no added token can come out."""
    if not text:
        return []
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    words = backend.pre_tokenizer.pre_tokenize_str(text) if backend.pre_tokenizer else [(text, 0)]
    return [token.id for word, _ in words for token in backend.model.tokenize(word)]
