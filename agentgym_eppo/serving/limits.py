"""The server's defaults, in one place for the config and the command line."""

LOOPBACK = "127.0.0.1"
"""The default address: only this machine can connect."""
DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 64
DEFAULT_IDLE_TIMEOUT_S = 600.0
"""Ten minutes: longer than any step (a shell command is cut at 30 s) plus a slow
trainer's generation between two steps."""
DEFAULT_MAX_BODY_BYTES = 8 << 20
"""8 MiB: room for the longest action text (1 Mi characters) JSON-encoded."""
