"""The contracts every environment keeps: calls, tools, statuses, rewards, spaces, tasks."""

from .base_env import AgentBenchEnv, StepResult, ToolResult
from .errors import (
    AgentInvalidAction,
    AgentValidationFailed,
    EpisodeEnd,
    InvalidArgumentsError,
    TaskFailure,
    TaskFormatError,
    ToolCallError,
    UnknownToolError,
    UnparseableCallError,
)
from .function_calls import FunctionCall, parse_function_call, validate_call
from .rewards import ABORT_PENALTY, FAILURE_REWARD, SUCCESS_REWARD
from .spaces import UnicodeText
from .statuses import Status
from .tasks import SPLITS, TaskRecord, TaskSet, asset_path, read_json_or_jsonl, write_jsonl_gz
from .tools import ToolSpec, string_tool
from .truncation import DEFAULT_OUTPUT_LIMIT, TRUNCATION_MARKER, truncate_output

__all__ = [
    "ABORT_PENALTY",
    "DEFAULT_OUTPUT_LIMIT",
    "FAILURE_REWARD",
    "SPLITS",
    "SUCCESS_REWARD",
    "TRUNCATION_MARKER",
    "AgentBenchEnv",
    "AgentInvalidAction",
    "AgentValidationFailed",
    "EpisodeEnd",
    "FunctionCall",
    "InvalidArgumentsError",
    "Status",
    "StepResult",
    "TaskFailure",
    "TaskFormatError",
    "TaskRecord",
    "TaskSet",
    "ToolCallError",
    "ToolResult",
    "ToolSpec",
    "UnicodeText",
    "UnknownToolError",
    "UnparseableCallError",
    "asset_path",
    "parse_function_call",
    "read_json_or_jsonl",
    "string_tool",
    "truncate_output",
    "validate_call",
    "write_jsonl_gz",
]
