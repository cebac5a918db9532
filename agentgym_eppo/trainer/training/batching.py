"""From transcripts to padded micro-batches, and the policy's per-token log-probs on them.

Only loss tokens (mask 1: what the model generated) are scored: a token at position
``j`` is predicted from the hidden state at ``j - 1``. Micro-batches group transcripts
of similar length (sorted) so that ``rows x longest`` stays under a token cap
(appendix A.2: 16,384 tokens per micro-batch); a transcript longer than the cap gets a
micro-batch of its own.

Rows are padded on the right, so a row's real tokens attend only to real tokens under
the causal mask alone: the forward takes no padding mask, which lets SDPA run its causal
kernel (it skips the key blocks above the diagonal; with a mask tensor it computes all
of them, and transformers builds a ``[rows, 1, T, T]`` mask first). The padded
positions' outputs are never read. A micro-batch (the loss's unit: BAPO's bounds and
the accumulation are per micro-batch) is computed in *pieces*: runs of rows of similar
length, each padded only to its own longest row (:func:`plan_pieces`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

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

    @cached_property
    def lengths(self) -> list[int]:
        """Each row's unpadded length (what the forward plans its pieces by, and what the
        update's FLOP count counts)."""
        return [int(n) for n in self.attention_mask.sum(dim=1).tolist()]


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


FORWARD_TOKENS = 64
"""A forward pass's fixed cost, in tokens of work: the length-8 forward of
``agentgym-tiny`` on a CPU core costs as much as ~70 tokens of a 256-token one."""


def plan_pieces(lengths: Sequence[int], forward_tokens: int = FORWARD_TOKENS) -> list[range]:
    """Split rows into runs of neighbours, one forward each, padded to the run's longest
    row: the split with the fewest padded tokens plus ``forward_tokens`` per forward
    (exact, by dynamic programming over the cut points). Rows keep their order, so the
    pieces' loss tokens come out in the micro-batch's order; sorted lengths (as
    :func:`plan_micro_batches` gives) make the runs homogeneous.

    >>> plan_pieces([100, 110, 2950, 3000])
    [range(0, 2), range(2, 4)]
    >>> plan_pieces([100, 110, 120])
    [range(0, 3)]
    """
    best = [0.0] + [math.inf] * len(lengths)  # best[j]: the cost of rows [0, j)
    cut = [0] * (len(lengths) + 1)  # cut[j]: where the last piece of rows [0, j) starts
    for end in range(1, len(lengths) + 1):
        longest = 0
        for start in range(end - 1, -1, -1):
            longest = max(longest, lengths[start])
            cost = best[start] + (end - start) * longest + forward_tokens
            if cost < best[end]:
                best[end], cut[end] = cost, start
    pieces: list[range] = []
    end = len(lengths)
    while end > 0:
        pieces.append(range(cut[end], end))
        end = cut[end]
    return pieces[::-1]


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
    forward_tokens: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob and entropy (at ``temperature``) of every loss token of ``batch``.

    ``forward_tokens`` None: one decoder forward for the whole micro-batch (FSDP ranks
    must run the same number of forwards); a number: one per piece of
    :func:`plan_pieces` with that fixed cost per forward."""
    device = next(model.parameters()).device
    lengths = batch.lengths
    pieces = (
        [range(len(lengths))] if forward_tokens is None else plan_pieces(lengths, forward_tokens)
    )
    rows, positions = batch.rows.to(device), batch.positions.to(device)
    first_token = torch.searchsorted(batch.rows, torch.tensor([p.start for p in pieces]))
    bounds = [*first_token.tolist(), batch.num_tokens]
    with autocast_context(bf16, device):
        selected = []
        for piece, start, end in zip(pieces, bounds, bounds[1:], strict=False):
            width = max(lengths[row] for row in piece)
            hidden = model.get_decoder()(
                input_ids=batch.input_ids[piece.start : piece.stop, :width].to(device),
                use_cache=False,
            ).last_hidden_state
            selected.append(hidden[rows[start:end] - piece.start, positions[start:end]])
        weight = model.get_output_embeddings().weight
        return chunked_logprobs_and_entropy(
            torch.cat(selected), weight, batch.targets.to(device), temperature, chunk_size
        )
