"""The server's defaults and bounds, in one place for the config, the guards and the
command line."""

LOOPBACK = "127.0.0.1"
"""The default address: only this machine can connect."""
DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 64
DEFAULT_IDLE_TIMEOUT_S = 600.0
"""Ten minutes: longer than any step (a shell command is cut at 30 s) plus a slow
trainer's generation between two steps."""
DEFAULT_MAX_BODY_BYTES = 8 << 20
"""8 MiB: room for the longest action text (1 Mi characters) JSON-encoded."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of a message or body: far above any action (a tool call's arguments
nest two or three levels), far below what the JSON parser and the error replies recurse
through."""
MAX_ECHO_CHARS = 200
"""Longest piece of the client's input an error message quotes back."""
MAX_ERROR_CHARS = 2000
"""Longest error message sent back."""
TOKEN_ENV = "AGENTGYM_EPPO_SERVE_TOKEN"
"""The environment variable ``serve`` reads its token from when ``--token`` is not given."""
MIN_TOKEN_CHARS = 16
"""Shortest token accepted (``secrets.token_urlsafe(24)`` gives 32 characters)."""
