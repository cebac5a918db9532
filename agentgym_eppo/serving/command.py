"""``agentgym-eppo serve``: its arguments and its run, importable without OpenEnv (the
CLI builds its parser from here; OpenEnv is imported only when a server starts).

>>> parser = argparse.ArgumentParser()
>>> add_serve_arguments(parser)
>>> args = parser.parse_args(["--task", "db", "--env", "split=dev", "--env", "max_turns=5"])
>>> (args.host, args.port, env_kwargs(args.env))
('127.0.0.1', 8000, {'split': 'dev', 'max_turns': 5})
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

import yaml

from agentgym_eppo.registration import ENVIRONMENTS

from .limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_PORT,
    LOOPBACK,
    TOKEN_ENV,
)


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` options (defaults are those of ``ServeConfig``)."""
    parser.add_argument("--task", required=True, choices=sorted(ENVIRONMENTS), help="the task")
    parser.add_argument(
        "--host",
        default=LOOPBACK,
        help="address to bind; anything but loopback exposes the task to the network "
        "(an OS episode runs the client's shell commands) and needs --token or --no-auth: "
        "see docs/serving.md",
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"a secret every request must carry (clients connect to "
        f"http://agentgym:TOKEN@host:port); default: the {TOKEN_ENV} variable, which "
        "keeps it out of the process list",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="serve beyond loopback without a token (anyone who reaches the port plays)",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0: a free one)")
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=DEFAULT_MAX_SESSIONS,
        help="session slots: live WebSocket sessions and stateless resets, together",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        help="seconds without a reset or step after which a session and its connection are closed",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="largest HTTP body or WebSocket message accepted",
    )
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment keyword for gym.make, repeatable (split=dev, db_url=..., "
        "max_turns=10); the value is read as YAML",
    )


def env_kwargs(pairs: Sequence[str]) -> dict[str, Any]:
    """``["split=dev", "max_turns=5"]`` -> ``{"split": "dev", "max_turns": 5}``."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key.strip():
            raise ValueError(f"--env takes KEY=VALUE, got {pair!r}")
        kwargs[key.strip()] = yaml.safe_load(value) if value.strip() else value
    return kwargs


def run_serve(args: argparse.Namespace) -> int:
    """Start the server described by ``args`` and serve until interrupted."""
    try:
        from .server import ServeConfig, serve
    except ImportError as error:
        raise RuntimeError(
            f"serving needs OpenEnv ({error.name} is missing): pip install 'agentgym-eppo[openenv]'"
        ) from error
    config = ServeConfig(
        task=args.task,
        host=args.host,
        port=args.port,
        max_sessions=args.max_sessions,
        idle_timeout_s=args.idle_timeout,
        max_body_bytes=args.max_body_bytes,
        env_kwargs=env_kwargs(args.env),
        token=args.token or os.environ.get(TOKEN_ENV) or None,
        no_auth=args.no_auth,
    )

    def ready(url: str) -> None:
        print(f"serving {config.task} at {url} (WebSocket sessions at /ws)", flush=True)

    serve(config, on_ready=ready)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentgym_eppo.serving", description="serve one task with OpenEnv"
    )
    add_serve_arguments(parser)
    return run_serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
