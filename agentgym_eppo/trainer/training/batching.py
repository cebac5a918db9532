"""From transcripts to padded micro-batches, and the policy's per-token log-probs on them.

Only loss tokens (mask 1: what the model generated) are scored: a token at position
``j`` is predicted from the hidden state at ``j - 1``. Micro-batches group transcripts
of similar length (sorted) so that ``rows x longest`` stays under a token cap
(appendix A.2: 16,384 tokens per micro-batch); a transcript longer than the cap gets a
micro-batch of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from agentgym_eppo.trainer.algorithms.losses import chunked_logprobs_and_entropy
from agentgym_eppo.trainer.devices import autocast_context
from agentgym_eppo.trainer.rollout.chat import Transcript


@dataclass
class MicroBatch:
    """Padded transcripts and the coordinates of their loss tokens."""

    members: list[int]  # indices of the transcripts (into the caller's list), in row order
    input_ids: torch.Tensor  # [B, T]
    attention_mask: torch.Tensor  # [B, T]
    rows: torch.Tensor  # [N] row of each loss token
    positions: torch.Tensor  # [N] position of the hidden state that predicts it (j - 1)
    targets: torch.Tensor  # [N] the loss token ids
    member_of_token: torch.Tensor  # [N] index into ``members`` of each loss token

    @property
    def num_tokens(self) -> int:
        return int(self.targets.shape[0])


def plan_micro_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Group indices (sorted by length) so that ``len(group) * longest <= max_tokens``."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    groups: list[list[int]] = []
    current: list[int] = []
    for index in order:
        if current and (len(current) + 1) * lengths[index] > max_tokens:
            groups.append(current)
            current = []
        current.append(index)
    if current:
        groups.append(current)
    return groups


def build_micro_batch(
    transcripts: Sequence[Transcript], members: Sequence[int], pad_token_id: int
) -> MicroBatch:
    width = max(len(transcripts[i]) for i in members)
    input_ids = torch.full((len(members), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(members), width), dtype=torch.long)
    rows, positions, targets, owners = [], [], [], []
    for row, index in enumerate(members):
        transcript = transcripts[index]
        length = len(transcript)
        input_ids[row, :length] = torch.tensor(transcript.tokens, dtype=torch.long)
        attention[row, :length] = 1
        for j in range(1, length):
            if transcript.mask[j]:
                rows.append(row)
                positions.append(j - 1)
                targets.append(transcript.tokens[j])
                owners.append(row)
    return MicroBatch(
        members=list(members),
        input_ids=input_ids,
        attention_mask=attention,
        rows=torch.tensor(rows, dtype=torch.long),
        positions=torch.tensor(positions, dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        member_of_token=torch.tensor(owners, dtype=torch.long),
    )


def micro_batches(
    transcripts: Sequence[Transcript], indices: Sequence[int], max_tokens: int, pad_token_id: int
) -> list[MicroBatch]:
    """Micro-batches over ``transcripts[i] for i in indices`` (members are those indices)."""
    plan = plan_micro_batches([len(transcripts[i]) for i in indices], max_tokens)
    return [
        build_micro_batch(transcripts, [indices[k] for k in group], pad_token_id) for group in plan
    ]


def token_logprobs(
    model: PreTrainedModel,
    batch: MicroBatch,
    temperature: float = 1.0,
    chunk_size: int = 1024,
    bf16: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob and entropy (at ``temperature``) of every loss token of ``batch``."""
    device = next(model.parameters()).device
    with autocast_context(bf16):
        hidden = model.get_decoder()(
            input_ids=batch.input_ids.to(device),
            attention_mask=batch.attention_mask.to(device),
            use_cache=False,
        ).last_hidden_state
        selected = hidden[batch.rows.to(device), batch.positions.to(device)]
        weight = model.get_output_embeddings().weight
        return chunked_logprobs_and_entropy(
            selected, weight, batch.targets.to(device), temperature, chunk_size
        )
