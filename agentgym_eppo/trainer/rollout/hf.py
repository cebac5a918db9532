"""The in-process rollout engine: the trainer's own ``transformers`` model, with a KV cache
kept across the turns of an episode.

:class:`HFGenerateEngine` implements
:class:`~agentgym_eppo.trainer.rollout.engine.RolloutEngine` with its own decoding loop
over the model's ``forward``. A multi-turn episode's next context is the previous one
plus the sampled turn and the environment's reply, so the engine keeps, after every
call, each row's KV cache with the tokens it covers; a later context that starts with
those tokens is prefilled only from there (*prefix reuse*: the reply is appended, the
conversation is not encoded again). Identical new contexts (the members of a GRPO group
at their first turn) are prefilled once. Decoding is batched across all waiting rows:
their caches are left-padded to one length, each row keeps its own positions, and a
row that ends (end-of-turn token or its own token budget) leaves the batch.

Kept caches are dropped when the weights change (the parameters' in-place version
counters move on an optimizer step or a ``load_state_dict``), so a cache never mixes
two policies; they are also dropped at the next call unless a context continues them.
With ``bf16`` the engine decodes with a bf16 copy of the weights, made once per weights
version (autocast would cast every weight again at every decoding step).

Every sampled token's log-probability and the entropy of the distribution it was drawn
from (at the call's temperature, from the logits it was sampled from) are reported by
:meth:`HFGenerateEngine.sampled_scores`: the update can take the old policy's log-probs
from them instead of a scoring forward (``rl.old_logprobs``, ``docs/trainer.md``).

Example (a tiny random model; the second turn reuses the first turn's cache):

>>> import torch
>>> from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer
>>> tokenizer = build_tokenizer(["ls -la /root", "echo hello"], vocab_size=300)
>>> model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1)
>>> engine = HFGenerateEngine(model, tokenizer.eos_token_id, tokenizer.pad_token_id)
>>> first = engine.generate([[5, 6, 7]], [4], temperature=0.0)[0]
>>> second = engine.generate([[5, 6, 7, *first, 8, 9]], [4], temperature=0.0)[0]
>>> engine.stats["reused_tokens"] == 3 + len(first) - 1
True
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import DynamicLayer

from agentgym_eppo.trainer.devices import autocast_context

from .episodes import TurnScores

LayerKV = tuple[torch.Tensor, torch.Tensor]


@dataclass
class _Row:
    """One context being decoded: its kept cache (per layer, ``[1, heads, length, dim]``)."""

    tokens: list[int]
    budget: int
    layers: list[LayerKV]
    logits: torch.Tensor  # the next token's logits, ``[vocab]``


class HFGenerateEngine:
    """Batched decoding with KV caches reused across turns (see the module docstring).

    Sampling uses only the temperature (no top-k or top-p), so the tokens come from the
    distribution the loss's log-probabilities describe; ``temperature == 0`` is greedy.
    Contexts are sorted by length and decoded in batches of at most ``batch_size``
    rows. ``stats`` counts prefilled, reused and sampled tokens since construction.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        eos_token_id: int,
        pad_token_id: int,
        batch_size: int = 64,
        bf16: bool = False,
    ) -> None:
        self.model = model
        self._cache_keyword = _cache_keyword(model)
        self.eos_token_id = int(eos_token_id)
        self.pad_token_id = int(pad_token_id)
        self.batch_size = int(batch_size)
        self.bf16 = bf16
        self.stats = {"prefilled_tokens": 0, "reused_tokens": 0, "sampled_tokens": 0}
        self._kept: dict[tuple[int, ...], list[LayerKV]] = {}
        self._kept_lengths: set[int] = set()
        self._shadow: PreTrainedModel | None = None
        self._weights_version: tuple[int, ...] = ()
        self._scores: list[TurnScores] = []

    def sampled_scores(self) -> list[TurnScores]:
        """The last :meth:`generate` call's :class:`TurnScores`, one per context (empty
        for a greedy call: ``temperature == 0`` samples from no distribution)."""
        return self._scores

    def update_weights(self, model: PreTrainedModel) -> None:
        self.model = model  # same process, same module: nothing to copy
        self._cache_keyword = _cache_keyword(model)
        self._forget()

    @torch.inference_mode()
    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], temperature: float
    ) -> list[list[int]]:
        if len(max_new_tokens) != len(contexts):
            raise ValueError("give one max_new_tokens per context")
        if any(not context for context in contexts):
            raise ValueError("every context needs at least one token")
        version = tuple(int(p._version) for p in self.model.parameters())
        if version != self._weights_version:
            self._forget()
            self._weights_version = version
        results: list[list[int]] = [[] for _ in contexts]
        scores = [TurnScores() for _ in contexts]
        kept: dict[tuple[int, ...], list[LayerKV]] = {}
        order = sorted(
            (i for i in range(len(contexts)) if max_new_tokens[i] > 0),
            key=lambda i: len(contexts[i]),
        )
        self._make_shadow()
        was_training = self.model.training
        self.model.eval()
        try:
            with autocast_context(self.bf16 and self._shadow is None, self._device()):
                for start in range(0, len(order), self.batch_size):
                    indices = order[start : start + self.batch_size]
                    rows = self._prefill(
                        [list(contexts[i]) for i in indices], [max_new_tokens[i] for i in indices]
                    )
                    for index, output, score, (tokens, layers) in zip(
                        indices, *self._decode(rows, temperature), strict=True
                    ):
                        results[index], scores[index] = output, score
                        if layers:
                            kept[tokens] = layers
        finally:
            self.model.train(was_training)
        self._kept = kept
        self._kept_lengths = {len(tokens) for tokens in kept}
        self._scores = scores
        return results

    def _forget(self) -> None:
        self._kept, self._kept_lengths = {}, set()
        self._shadow = None

    def _make_shadow(self) -> None:
        """With ``bf16``, the bf16 copy of the weights that decodes, made once per weights
        version (autocast would cast every weight again at every decoding step); a
        sharded model gets no copy and decodes under autocast."""
        if self._shadow is not None or not self.bf16:
            return
        if any(type(p).__name__ == "DTensor" for p in self.model.parameters()):
            return
        shadow = copy.deepcopy(self.model)
        shadow.to(dtype=torch.bfloat16)  # type: ignore[call-arg]
        self._shadow = shadow.eval()

    # ------------------------------------------------------------------ prefill

    def _reusable(self, context: list[int]) -> tuple[int, list[LayerKV]]:
        """The longest kept cache whose tokens start ``context`` (and are shorter)."""
        for length in sorted(self._kept_lengths, reverse=True):
            if length < len(context):
                layers = self._kept.get(tuple(context[:length]))
                if layers is not None:
                    return length, layers
        return 0, []

    def _prefill(self, contexts: list[list[int]], budgets: list[int]) -> list[_Row]:
        done: dict[tuple[int, ...], tuple[list[LayerKV], torch.Tensor]] = {}
        rows = []
        for context, budget in zip(contexts, budgets, strict=True):
            key = tuple(context)
            if key not in done:
                done[key] = self._extend(context, *self._reusable(context))
            layers, logits = done[key]
            rows.append(_Row(context, budget, layers, logits))
        return rows

    def _extend(
        self, context: list[int], reused: int, layers: list[LayerKV]
    ) -> tuple[list[LayerKV], torch.Tensor]:
        """Run ``context[reused:]`` on top of the cache of ``context[:reused]``."""
        device = self._device()
        suffix = torch.tensor([context[reused:]], dtype=torch.long, device=device)
        positions = torch.arange(reused, len(context), device=device)[None]
        cache = DynamicCache(ddp_cache_data=layers or None, config=self.model.config)
        output = self._forward(suffix, None, positions, cache)
        self.stats["prefilled_tokens"] += len(context) - reused
        self.stats["reused_tokens"] += reused
        return _layers(cache), output.logits[0, -1].float()

    # ------------------------------------------------------------------ decoding

    def _decode(
        self, rows: list[_Row], temperature: float
    ) -> tuple[list[list[int]], list[TurnScores], list[tuple[tuple[int, ...], list[LayerKV]]]]:
        """Sample every row's turn; return the turns, their scores and each row's cache
        to keep."""
        device = self._device()
        width = max(row.layers[0][0].shape[2] for row in rows)
        pads = [width - row.layers[0][0].shape[2] for row in rows]
        capacity = width + max(row.budget for row in rows)
        cache = DynamicCache(config=self.model.config)
        cache.layers = [
            _TurnLayer([row.layers[layer] for row in rows], pads, capacity)
            for layer in range(len(rows[0].layers))
        ]
        masks = torch.ones((len(rows), capacity), dtype=torch.long, device=device)
        for i, pad in enumerate(pads):
            masks[i, :pad] = 0
        positions = torch.tensor([[len(row.tokens)] for row in rows], device=device)
        logits = torch.stack([row.logits for row in rows])
        outputs: list[list[int]] = [[] for _ in rows]
        scores = [TurnScores() for _ in rows]
        kept: list[tuple[tuple[int, ...], list[LayerKV]]] = [((), []) for _ in rows]
        active = list(range(len(rows)))  # batch position -> row
        while True:
            sampled = _sample(logits, temperature)
            logprobs, entropy = _scores(logits, sampled, temperature)
            staying = []
            for position, row in enumerate(active):
                token = int(sampled[position])
                outputs[row].append(token)
                if temperature > 0:
                    scores[row].logprobs.append(logprobs[position])
                    scores[row].entropy.append(entropy[position])
                if token != self.eos_token_id and len(outputs[row]) < rows[row].budget:
                    staying.append(position)
                    continue
                # the cache covers the context and the turn but its last token (never fed)
                layers = [
                    (_row_of(k, position, pads[row]), _row_of(v, position, pads[row]))
                    for k, v in _layers(cache)
                ]
                kept[row] = (tuple(rows[row].tokens) + tuple(outputs[row][:-1]), layers)
            self.stats["sampled_tokens"] += len(active)
            if not staying:
                break
            if len(staying) < len(active):
                select = torch.tensor(staying, device=device)
                cache.batch_select_indices(select)
                masks, positions, sampled = masks[select], positions[select], sampled[select]
                active = [active[p] for p in staying]
            covered = cache.get_seq_length() + 1  # the cache's tokens (padding too) and this one
            output = self._forward(
                sampled[:, None].to(device), masks[:, :covered], positions, cache
            )
            positions = positions + 1
            logits = output.logits[:, -1].float()
        return outputs, scores, kept

    def _forward(
        self,
        input_ids: torch.Tensor,
        mask: torch.Tensor | None,
        positions: torch.Tensor,
        cache: DynamicCache,
    ) -> Any:
        """One forward pass that appends to ``cache`` in place (recent transformers name
        the keyword ``cache``, earlier ones ``past_key_values``)."""
        decoder = self._shadow if self._shadow is not None else self.model
        return decoder(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_keyword: cache},
        )

    def _device(self) -> torch.device:
        return next(self.model.parameters()).device


class _TurnLayer(DynamicLayer):
    """One layer's cache of a decoding batch, in buffers allocated once per turn for the
    longest row's context and budget: each step writes its keys and values in place
    instead of concatenating the whole cache again (``DynamicLayer``'s way, whose copies
    grew with the context at every step). ``keys``/``values`` are views of the filled part.
    """

    def __init__(self, rows: list[LayerKV], pads: list[int], capacity: int) -> None:
        super().__init__()
        first = rows[0][0]
        shape = (len(rows), first.shape[1], capacity, first.shape[3])
        self._buffers = [first.new_empty(shape), first.new_empty(shape)]
        for i, (row, pad) in enumerate(zip(rows, pads, strict=True)):
            for buffer, part in zip(self._buffers, row, strict=True):
                buffer[i, :, :pad] = 0  # masked, but never garbage (0 x NaN is NaN)
                buffer[i, :, pad : pad + part.shape[2]] = part[0]
        self.length = pads[0] + first.shape[2]  # every row padded to the same width
        self.device, self.is_initialized = first.device, True
        self._view()

    def _view(self) -> None:
        self.keys, self.values = (b[:, :, : self.length] for b in self._buffers)

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        end = self.length + key_states.shape[2]
        self._buffers[0][:, :, self.length : end] = key_states
        self._buffers[1][:, :, self.length : end] = value_states
        self.length = end
        self._view()
        return self.keys, self.values  # type: ignore[return-value]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._buffers = [b[indices] for b in self._buffers]
        self._view()


def _cache_keyword(model: PreTrainedModel) -> str:
    parameters = inspect.signature(model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def _layers(cache: DynamicCache) -> list[LayerKV]:
    return [(layer.keys, layer.values) for layer in cache.layers]  # type: ignore[union-attr,misc]


def _row_of(tensor: torch.Tensor, position: int, pad: int) -> torch.Tensor:
    """One row of a batch cache without its left padding, as its own compact tensor."""
    return tensor[position : position + 1, :, pad:].clone()


def _scores(
    logits: torch.Tensor, sampled: torch.Tensor, temperature: float
) -> tuple[list[float], list[float]]:
    """Each row's sampled token's log-probability and the distribution's entropy at
    ``temperature``, computed as the update's scoring forward computes them
    (:func:`~agentgym_eppo.trainer.algorithms.losses.chunked_logprobs_and_entropy`);
    nothing for a greedy call."""
    if temperature <= 0:
        return [], []
    log_probs = torch.log_softmax(logits / temperature, dim=-1)
    chosen = log_probs.gather(-1, sampled[:, None])[:, 0]
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return chosen.tolist(), entropy.tolist()


def _sample(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    if temperature <= 0:
        return logits.argmax(dim=-1)
    probabilities = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probabilities, 1)[:, 0]
