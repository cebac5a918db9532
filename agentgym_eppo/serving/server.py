"""The OpenEnv server of one task: OpenEnv's ``HTTPEnvServer`` on a FastAPI app, run by
uvicorn.

What OpenEnv serves is OpenEnv's: ``/ws`` (one session, one environment, per WebSocket
connection, idle ones closed after ``idle_timeout_s``), the stateless ``/reset``,
``/step`` and ``/state``, ``/schema``, ``/metadata``, ``/health`` and ``/mcp``. This
module adds what a shared server needs around it:

- one pool of ``max_sessions`` slots for WebSocket sessions and stateless resets, the
  idle timeout on real activity, and no session without a connection
  (:mod:`.sessions`);
- ``GET /sessions``: the slots taken and the limit (OpenEnv's ``ServerCapacityStatus``);
- a token on every route when ``token`` is set, required to serve beyond loopback
  (:class:`~.guards.TokenGuard`);
- a limit on request bodies (``max_body_bytes``): a larger HTTP body is answered 413,
  a larger WebSocket message closes that connection with code 1009 (the WebSocket
  protocol's "message too big"); bodies and messages that OpenEnv cannot answer
  cleanly are refused before they reach it (:mod:`.guards`);
- errors as FastAPI's ``{"detail": ...}`` with a 4xx status for what the client got
  wrong (quoting its input in part), and a 500 that names the error without a traceback
  for a server fault;
- closing every session still open when the server stops.

>>> config = ServeConfig(task="db", max_sessions=4)
>>> (config.host, config.port, config.idle_timeout_s)
('127.0.0.1', 8000, 600.0)
>>> ServeConfig(task="db", max_sessions=0)
Traceback (most recent call last):
...
ValueError: max_sessions must be at least 1, got 0
>>> ServeConfig(task="db", host="0.0.0.0")
Traceback (most recent call last):
...
ValueError: serving on 0.0.0.0 lets anyone who reaches the port play episodes (the OS task runs their shell commands): give a token (--token, or the AGENTGYM_EPPO_SERVE_TOKEN variable), or pass --no-auth to serve without one
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from openenv.core.env_server.types import ConcurrencyConfig, ServerCapacityStatus

from agentgym_eppo.registration import ENVIRONMENTS, env_id_for

from .environment import AgentBenchEnvironment, RequestError, gym_kwargs
from .guards import BodyLimit, TokenGuard, WebSocketGuard, clip_errors, clip_text
from .limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_PORT,
    LOOPBACK,
    MAX_ERROR_CHARS,
    MIN_TOKEN_CHARS,
    TOKEN_ENV,
)
from .sessions import SessionServer
from .types import AgentBenchObservation, action_class

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeConfig:
    """What one server serves and its limits (checked when built)."""

    task: str
    host: str = LOOPBACK
    port: int = DEFAULT_PORT
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """Session slots: live WebSocket sessions (``/ws`` and ``/mcp``) and stateless resets
    running, together; one more session is refused with ``CAPACITY_REACHED``, one more
    stateless reset with 503."""
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    """A session with no reset or step for this long is closed, and its connection
    (checked every ``max(idle_timeout_s / 4, 5)`` seconds, OpenEnv's reaper period)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Passed to ``gym.make`` for every session (``split``, ``tasks``, ``db_url``, ...)."""
    token: str | None = field(default=None, repr=False)
    """When set, every request and WebSocket handshake must carry it (see
    :class:`~.guards.TokenGuard`); required to serve on an address other than loopback."""
    no_auth: bool = False
    """Serve beyond loopback without a token: anyone who reaches the port plays."""

    def __post_init__(self) -> None:
        if self.task not in ENVIRONMENTS:
            raise ValueError(f"unknown task {self.task!r}; available: {', '.join(ENVIRONMENTS)}")
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if not self.idle_timeout_s > 0:
            raise ValueError(f"idle_timeout_s must be positive, got {self.idle_timeout_s}")
        if self.max_body_bytes < 1024:
            raise ValueError(f"max_body_bytes must be at least 1024, got {self.max_body_bytes}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise ValueError(
                f"the token must have at least {MIN_TOKEN_CHARS} characters, got "
                f"{len(self.token)}: make one with python -c 'import secrets; "
                "print(secrets.token_urlsafe(24))'"
            )
        if self.token is None and not self.no_auth and not is_loopback(self.host):
            raise ValueError(
                f"serving on {self.host} lets anyone who reaches the port play episodes "
                f"(the OS task runs their shell commands): give a token (--token, or the "
                f"{TOKEN_ENV} variable), or pass --no-auth to serve without one"
            )

    def exposure_warning(self) -> str | None:
        """What to warn of before serving on this address, or None (loopback)."""
        if is_loopback(self.host):
            return None
        if self.token is None:
            return (
                f"serving {self.task} on {self.host} WITHOUT authentication (--no-auth): "
                "anyone who reaches the port plays episodes (the OS task runs their shell "
                "commands); see docs/serving.md, 'Exposing a server'"
            )
        return (
            f"serving {self.task} on {self.host}: clients need the token, which travels "
            "unencrypted (no TLS); keep the port on a private network or behind a TLS "
            "proxy; see docs/serving.md, 'Exposing a server'"
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only.

    >>> [is_loopback(host) for host in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "10.0.0.2")]
    [True, True, True, False, False]
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve to anything
        return False


def build_app(config: ServeConfig, *, check_env: bool = True) -> FastAPI:
    """The FastAPI app serving ``config.task``; ``check_env`` first builds one environment
    and loads its task set, so that wrong ``env_kwargs`` fail here and not per session."""
    factory = functools.partial(AgentBenchEnvironment, config.task, dict(config.env_kwargs))
    if check_env:
        _check_environment(config)
    server = SessionServer(
        factory,
        action_class(config.task),
        AgentBenchObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=config.max_sessions, session_timeout=config.idle_timeout_s
        ),
    )
    app = FastAPI(
        title=f"agentgym-eppo {config.task} (OpenEnv)",
        description="An AgentBench task served with OpenEnv: WebSocket sessions at /ws.",
    )
    server.register_routes(app)

    @app.get("/sessions", response_model=ServerCapacityStatus, tags=["Health"])
    async def sessions() -> ServerCapacityStatus:
        """Slots taken (live sessions and stateless resets running) and the limit."""
        return server.get_capacity_status()

    app.router.on_shutdown.append(server.close_all)
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _server_error)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(WebSocketGuard)
    if config.token is not None:
        app.add_middleware(TokenGuard, token=config.token)  # outermost: checked first
    app.state.openenv_server = server
    app.state.config = config
    return app


def bind(config: ServeConfig) -> tuple[Any, socket.socket, str]:
    """A uvicorn server for ``config`` and its bound socket and base URL (``port=0``
    binds a free port); ``server.run(sockets=[sock])`` serves, ``server.should_exit =
    True`` stops it. Beyond loopback, logs :meth:`ServeConfig.exposure_warning`."""
    import uvicorn

    app = build_app(config)
    sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, config.port))
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    warning = config.exposure_warning()
    if warning is not None:
        logger.warning("%s", warning)
    # ws_max_size bounds a WebSocket message as the middleware bounds an HTTP body;
    # pings find a peer that vanished without closing its connection
    uv_config = uvicorn.Config(
        app,
        ws_max_size=config.max_body_bytes,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        log_level="warning",
        timeout_graceful_shutdown=10,
    )
    return uvicorn.Server(uv_config), sock, url


def serve(config: ServeConfig, *, on_ready: Callable[[str], None] | None = None) -> None:
    """Run the server until SIGINT or SIGTERM; ``on_ready`` gets the base URL once it
    accepts connections."""
    server, sock, url = bind(config)
    if on_ready is not None:
        original = server.startup

        async def startup(sockets: list[socket.socket] | None = None) -> None:
            await original(sockets=sockets)
            on_ready(url)

        server.startup = startup
    server.run(sockets=[sock])


async def _request_error(request: Request, error: Exception) -> JSONResponse:
    status = getattr(error, "status_code", 400)
    return JSONResponse({"detail": clip_text(str(error), MAX_ERROR_CHARS)}, status_code=status)


async def _validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    return JSONResponse({"detail": clip_errors(error.errors())}, status_code=422)


async def _http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, HTTPException)
    detail = error.detail
    if isinstance(detail, list):  # OpenEnv's 422: pydantic's errors, the input in them
        detail = clip_errors(detail)
    elif isinstance(detail, str):
        detail = clip_text(detail, MAX_ERROR_CHARS)
    return JSONResponse({"detail": detail}, status_code=error.status_code, headers=error.headers)


async def _server_error(request: Request, error: Exception) -> JSONResponse:
    logger.error("%s %s failed", request.method, request.url.path, exc_info=error)
    return JSONResponse(
        {"detail": clip_text(f"server error: {type(error).__name__}: {error}", MAX_ERROR_CHARS)},
        status_code=500,
    )


def _check_environment(config: ServeConfig) -> None:
    env = gym.make(env_id_for(config.task), **gym_kwargs(config.task, config.env_kwargs))
    try:
        logger.info("%s: %d task instances", config.task, env.unwrapped.num_tasks)  # type: ignore[attr-defined]
    finally:
        env.close()
