"""Gymnasium wrappers: chat, tool-call formats, recording and statistics.

Wrappers: :class:`ChatHistory` (observations as chat messages), tool-call formats
(:class:`HermesFormat`, :class:`ReActFormat`, :class:`ToolCallFormatWrapper`),
AgentBench's opening messages (:func:`agentbench_messages`), trajectory recording
(:class:`TrajectoryRecorder`, :class:`VectorEpisodeMonitor`) and per-task statistics
(:class:`TaskStatistics`, :class:`EpisodeStatistics`).

:class:`OpenAIToolsView` serves any OpenAI-compatible client. The adapters for TRL,
verl, SkyRL and OpenRLHF live in :mod:`agentgym_eppo.adapters`.
"""

from .chat import ChatHistory, MessageList
from .formats import (
    FORMATS,
    HermesFormat,
    ReActFormat,
    ToolCallFormat,
    ToolCallFormatWrapper,
    get_format,
)
from .openai_tools import OpenAIToolsView
from .prompts import agentbench_messages
from .recording import TrajectoryRecorder, TrajectoryWriter, read_trajectories
from .session import EpisodeSession, make_env
from .statistics import EpisodeStatistics, TaskStatistics
from .vector_monitor import VectorEpisodeMonitor

__all__ = [
    "FORMATS",
    "ChatHistory",
    "EpisodeSession",
    "EpisodeStatistics",
    "HermesFormat",
    "MessageList",
    "OpenAIToolsView",
    "ReActFormat",
    "TaskStatistics",
    "ToolCallFormat",
    "ToolCallFormatWrapper",
    "TrajectoryRecorder",
    "TrajectoryWriter",
    "VectorEpisodeMonitor",
    "agentbench_messages",
    "get_format",
    "make_env",
    "read_trajectories",
]
