"""Reward constants shared by every environment (one scale across the five tasks)."""

from __future__ import annotations

ABORT_PENALTY: float = -0.2
"""Reward for every abnormal end (turn limit, invalid call, context limit, task error).

AgentRL (and the EPPO paper, appendix A) give -0.2 to any non-``completed`` status so
that an agent cannot escape a hard task by breaking the protocol.
"""

SUCCESS_REWARD: float = 1.0
FAILURE_REWARD: float = 0.0
