"""FLOP counts of a causal decoder's passes, the one formula behind every share of the
machine's peak that the benchmarks report."""

from __future__ import annotations

from collections.abc import Sequence


def forward_flops(parameters: int, layers: int, hidden: int, lengths: Sequence[int]) -> float:
    """FLOPs of one forward pass over sequences of ``lengths`` tokens: 2 x parameters per
    token plus causal attention (QK^T and AV: 2 x layers x hidden x length^2 a sequence,
    the causal mask halving the full 4). Padding is not counted; a backward pass is 2
    forwards.

    >>> forward_flops(1000, layers=2, hidden=8, lengths=[10])  # 2*1000*10 + 2*2*8*100
    23200.0
    """
    linear = 2 * parameters * sum(lengths)
    attention = 2 * layers * hidden * sum(n * n for n in lengths)
    return float(linear + attention)
