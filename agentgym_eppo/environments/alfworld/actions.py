"""AgentBench's reading of an ALFWorld action: lower-case it, then snap it to a command.

AgentBench keeps the first line of the action, lower-cased and stripped; if it is not
an admissible command it takes the admissible command with the highest sentence BLEU
against it (NLTK's ``sentence_bleu``, 4-gram, smoothing method 4), provided that score
exceeds 0.01, and otherwise passes the text on unchanged (the game answers "Nothing
happens."). :func:`sentence_bleu` is NLTK's computation written out, so the extra does
not need NLTK; like NLTK it is undefined for a one-word action that matches a word but
no longer n-gram (NLTK raises, AgentBench keeps the action as it is).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

SNAP_THRESHOLD = 0.01
MAX_ACTION_CHARS = 1000
"""Longer actions are cut before scoring: no command is near that long."""

_SMOOTHING_K = 5  # NLTK's SmoothingFunction(k=5), Chen & Cherry (2014) method 4


def normalize_action(text: str) -> str:
    """AgentBench's cleaning: first line, stripped, lower-cased (and cut at MAX_ACTION_CHARS)."""
    stripped = text.strip()
    first_line = stripped.split("\n")[0] if stripped else ""
    return first_line.strip().lower()[:MAX_ACTION_CHARS]


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def sentence_bleu(reference: str, candidate: str, max_order: int = 4) -> float | None:
    """BLEU of ``candidate`` against one ``reference``, whitespace-tokenised, as NLTK
    computes it with smoothing method 4; ``None`` where NLTK's log(0) fails."""
    ref, hyp = reference.split(), candidate.split()
    matches, totals = [], []
    for n in range(1, max_order + 1):
        hyp_counts = _ngrams(hyp, n)
        ref_counts = _ngrams(ref, n)
        matches.append(sum(min(count, ref_counts[gram]) for gram, count in hyp_counts.items()))
        totals.append(max(1, sum(hyp_counts.values())))
    if matches[0] == 0:
        return 0.0
    precisions: list[float] = []
    smoothing_step = 1
    for match, total in zip(matches, totals, strict=True):
        if match == 0 and len(hyp) > 1:
            precisions.append(1 / (2**smoothing_step * _SMOOTHING_K / math.log(len(hyp))) / total)
            smoothing_step += 1
        else:
            precisions.append(match / total)
    if any(p == 0 for p in precisions):
        return None
    ref_len, hyp_len = len(ref), len(hyp)
    brevity = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return brevity * math.exp(sum(math.log(p) for p in precisions) / max_order)


def snap_action(text: str, admissible: Sequence[str]) -> str:
    """The command AgentBench would send for ``text`` given the admissible commands."""
    action = normalize_action(text)
    if not admissible or action in admissible:
        return action
    best_score, best = -1.0, action
    for command in admissible:
        score = sentence_bleu(command, action)
        if score is None:
            return action
        if score > best_score:
            best_score, best = score, command
    return best if best_score > SNAP_THRESHOLD else action
