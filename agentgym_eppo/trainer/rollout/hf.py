"""The in-process rollout engine: ``transformers``' ``generate`` on the trainer's own model.

:class:`HFGenerateEngine` implements
:class:`~agentgym_eppo.trainer.rollout.engine.RolloutEngine` through ``transformers``'
``generate`` (KV cache within the turn, one padded batch across every waiting slot); it
suits CPUs and small GPUs, and shares the trainer's module, so a weight sync is free.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import PreTrainedModel

from agentgym_eppo.trainer.devices import autocast_context


class HFGenerateEngine:
    """Batched ``model.generate`` over left-padded contexts, sampling the full distribution.

    Sampling uses only the temperature (``top_k=0``, ``top_p=1``), so the tokens come
    from the distribution the loss's log-probabilities describe. Contexts are sorted
    by length and cut into batches of at most ``batch_size`` to limit padding. Each
    context gets its own token budget: a batch generates up to its largest budget and
    every row is cut back to its own.
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
        self.eos_token_id = int(eos_token_id)
        self.pad_token_id = int(pad_token_id)
        self.batch_size = int(batch_size)
        self.bf16 = bf16

    def update_weights(self, model: PreTrainedModel) -> None:
        self.model = model  # same process, same module: nothing to copy

    @torch.no_grad()
    def generate(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: Sequence[int], temperature: float
    ) -> list[list[int]]:
        if len(max_new_tokens) != len(contexts):
            raise ValueError("give one max_new_tokens per context")
        results: list[list[int]] = [[] for _ in contexts]
        order = sorted(range(len(contexts)), key=lambda i: len(contexts[i]))
        was_training = self.model.training
        self.model.eval()
        try:
            for start in range(0, len(order), self.batch_size):
                rows = order[start : start + self.batch_size]
                outputs = self._generate_batch(
                    [contexts[i] for i in rows], max(max_new_tokens[i] for i in rows), temperature
                )
                for row, output in zip(rows, outputs, strict=True):
                    results[row] = output[: max_new_tokens[row]]
        finally:
            self.model.train(was_training)
        return results

    def _generate_batch(
        self, contexts: Sequence[Sequence[int]], max_new_tokens: int, temperature: float
    ) -> list[list[int]]:
        width = max(len(c) for c in contexts)
        device = next(self.model.parameters()).device
        input_ids = torch.full((len(contexts), width), self.pad_token_id, dtype=torch.long)
        attention = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, context in enumerate(contexts):
            input_ids[row, width - len(context) :] = torch.tensor(context, dtype=torch.long)
            attention[row, width - len(context) :] = 1
        sampling = (
            {"do_sample": True, "temperature": float(temperature), "top_k": 0, "top_p": 1.0}
            if temperature > 0
            else {"do_sample": False}
        )
        with autocast_context(self.bf16):
            generated = self.model.generate(  # type: ignore[operator]
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                max_new_tokens=max_new_tokens,
                eos_token_id=self.eos_token_id,
                pad_token_id=self.pad_token_id,
                use_cache=True,
                **sampling,
            )
        outputs = []
        for row in generated[:, width:].tolist():
            if self.eos_token_id in row:
                row = row[: row.index(self.eos_token_id) + 1]
            outputs.append(row)
        return outputs
