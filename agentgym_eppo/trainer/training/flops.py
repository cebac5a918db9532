"""FLOP counts of a causal decoder's passes: what the trainer logs as its update's work
(``update_gflop``) and what the benchmarks state shares of the machine's peak from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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


class FlopCounter:
    """Counts the FLOPs of a model's passes over unpadded rows (from the model's config and
    parameter count, read once).

    >>> from types import SimpleNamespace
    >>> toy = SimpleNamespace(parameters=lambda: [SimpleNamespace(numel=lambda: 1000)],
    ...                       config=SimpleNamespace(num_hidden_layers=2, hidden_size=8))
    >>> counter = FlopCounter(toy)
    >>> counter.add([10], passes=3)  # forward and backward
    >>> counter.take()
    69600.0
    >>> counter.take()
    0.0
    """

    def __init__(self, model: Any) -> None:
        self.parameters = sum(p.numel() for p in model.parameters())
        self.layers = model.config.num_hidden_layers
        self.hidden = model.config.hidden_size
        self.flops = 0.0

    def add(self, lengths: Sequence[int], passes: int = 1) -> None:
        """``passes`` forward-pass equivalents over rows of ``lengths`` tokens."""
        self.flops += passes * forward_flops(self.parameters, self.layers, self.hidden, lengths)

    def take(self) -> float:
        """The FLOPs counted since the last call."""
        flops, self.flops = self.flops, 0.0
        return flops
