"""Typed errors: each carries a message that a model can read and act on.

Two families: :class:`ToolCallError` (the action could not be turned into a valid
call of one of the environment's tools) and :class:`EpisodeEnd` (a tool decided that
the episode is over abnormally). Neither ever escapes ``Env.step``: the base
environment turns them into an observation or a terminal status.
"""

from __future__ import annotations

from .statuses import Status


class ToolCallError(ValueError):
    """The action is not a valid call of one of the environment's tools."""

    status: Status = Status.AGENT_INVALID_ACTION


class UnparseableCallError(ToolCallError):
    """No tool call could be read from the text (bad JSON, no call, several calls)."""


class UnknownToolError(ToolCallError):
    """The call names a tool that this environment does not have."""


class InvalidArgumentsError(ToolCallError):
    """The call's arguments do not satisfy the tool's JSON schema."""

    status = Status.AGENT_VALIDATION_FAILED


class EpisodeEnd(Exception):
    """Raised by a tool implementation to end the episode with an abnormal status."""

    status: Status = Status.TASK_ERROR

    def __init__(self, message: str, status: Status | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class AgentValidationFailed(EpisodeEnd):
    """The agent referred to something that does not exist (e.g. KG variable ``#9``)."""

    status = Status.AGENT_VALIDATION_FAILED


class AgentInvalidAction(EpisodeEnd):
    """The agent's action is not allowed (e.g. ALFWorld's third identical action)."""

    status = Status.AGENT_INVALID_ACTION


class TaskFailure(EpisodeEnd):
    """The environment's backend failed (server down, sandbox died): not the agent's fault."""

    status = Status.TASK_ERROR


class TaskFormatError(ValueError):
    """A task file or record cannot be loaded; the message names the file and the field."""
