"""The OpenEnv server of one task: OpenEnv's ``HTTPEnvServer`` on a FastAPI app, run by
uvicorn.

Everything OpenEnv serves is OpenEnv's: ``/ws`` (one session, one environment, per
WebSocket connection, at most ``max_sessions`` at once, idle ones closed after
``idle_timeout_s``), the stateless ``/reset``, ``/step`` and ``/state``, ``/schema``,
``/metadata`` and ``/health``. This module adds only what a shared server needs
around it:

- ``GET /sessions``: the live session count and the limit (OpenEnv's
  ``ServerCapacityStatus``);
- a limit on request bodies (``max_body_bytes``): a larger HTTP body is answered 413,
  a larger WebSocket message closes that connection with code 1009 (the WebSocket
  protocol's "message too big");
- errors as FastAPI's ``{"detail": ...}`` with a 4xx status for what the client got
  wrong, and a 500 that names the error without a traceback for a server fault;
- closing every session still open when the server stops.

>>> config = ServeConfig(task="db", max_sessions=4)
>>> (config.host, config.port, config.idle_timeout_s)
('127.0.0.1', 8000, 600.0)
>>> ServeConfig(task="db", max_sessions=0)
Traceback (most recent call last):
...
ValueError: max_sessions must be at least 1, got 0
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.types import (
    ConcurrencyConfig,
    ServerCapacityStatus,
    WSErrorCode,
    WSErrorResponse,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect
from uvicorn.protocols.utils import ClientDisconnected

from agentgym_eppo.registration import ENVIRONMENTS, env_id_for

from .environment import AgentBenchEnvironment, RequestError
from .limits import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_PORT,
    LOOPBACK,
)
from .types import AgentBenchObservation, action_class

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeConfig:
    """What one server serves and its limits (checked when built)."""

    task: str
    host: str = LOOPBACK
    port: int = DEFAULT_PORT
    max_sessions: int = DEFAULT_MAX_SESSIONS
    """Live WebSocket sessions at most; one more is refused with ``CAPACITY_REACHED``."""
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    """A session with no message for this long is closed (checked every
    ``max(idle_timeout_s / 4, 5)`` seconds, OpenEnv's reaper period)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Passed to ``gym.make`` for every session (``split``, ``tasks``, ``db_url``, ...)."""

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


def build_app(config: ServeConfig, *, check_env: bool = True) -> FastAPI:
    """The FastAPI app serving ``config.task``; ``check_env`` first builds one environment
    and loads its task set, so that wrong ``env_kwargs`` fail here and not per session."""
    factory = functools.partial(AgentBenchEnvironment, config.task, dict(config.env_kwargs))
    if check_env:
        _check_environment(config)
    server = HTTPEnvServer(
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
        """Live WebSocket sessions and the limit."""
        return server.get_capacity_status()

    async def close_open_sessions() -> None:
        # uvicorn ends open WebSockets on shutdown; what OpenEnv still holds is closed here
        for session_id in list(server._sessions):
            await server._destroy_session(session_id)

    app.router.on_shutdown.append(close_open_sessions)
    app.add_exception_handler(RequestError, _request_error)
    app.add_exception_handler(Exception, _server_error)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(WebSocketGuard)
    app.state.openenv_server = server
    app.state.config = config
    return app


def bind(config: ServeConfig) -> tuple[Any, socket.socket, str]:
    """A uvicorn server for ``config`` and its bound socket and base URL (``port=0``
    binds a free port); ``server.run(sockets=[sock])`` serves, ``server.should_exit =
    True`` stops it."""
    import uvicorn

    app = build_app(config)
    sock = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((config.host, config.port))
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}"
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


class BodyLimit:
    """Answers 413 to an HTTP request whose body exceeds ``max_bytes`` (declared or
    streamed), before the app reads it; WebSocket messages are limited by uvicorn."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks: list[Message] = []
        size = 0
        while True:
            message = await receive()
            chunks.append(message)
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(send)
                return
            if message["type"] != "http.request" or not message.get("more_body", False):
                break

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {"detail": f"request body larger than the server's limit of {self.max_bytes} bytes"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})


class WebSocketGuard:
    """What OpenEnv's ``/ws`` endpoint needs around it to serve every client cleanly.

    - A session over the limit: OpenEnv sends its ``CAPACITY_REACHED`` error and closes
      at once, before the client has sent anything, so the client's first ``send`` meets
      a closed connection and reports only that. Here the close waits (up to
      :data:`REFUSAL_WAIT_S`) for the client's first message, so that the client reads
      the error as its answer, and carries code 1013 (try again later) and the reason.
    - A message whose JSON holds a lone surrogate (``"\\ud800"``): OpenEnv would pass it
      on, and the answer that echoes it cannot be encoded, which ends the session. Here
      it is answered with OpenEnv's ``VALIDATION_ERROR`` and never reaches the session.
    - A peer that leaves while its session closes is the end of that session, not a
      server error.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        refusal: list[str] = []

        async def guarded_receive() -> Message:
            while True:
                message = await receive()
                problem = _unencodable(message.get("text"))
                if problem is None:
                    return message
                await send({"type": "websocket.send", "text": _ws_error(problem, _INVALID)})

        async def guarded_send(message: Message) -> None:
            if message["type"] == "websocket.send":
                code, text = _ws_error_code(message.get("text"))
                if code == _CAPACITY:
                    refusal.append(text)
            elif message["type"] == "websocket.close" and refusal:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(receive(), REFUSAL_WAIT_S)
                message = {**message, "code": 1013, "reason": refusal[0][:120]}
            await send(message)

        with contextlib.suppress(WebSocketDisconnect, ClientDisconnected):
            await self.app(scope, guarded_receive, guarded_send)


_CAPACITY = WSErrorCode.CAPACITY_REACHED.value
_INVALID = WSErrorCode.VALIDATION_ERROR.value
REFUSAL_WAIT_S = 10.0


def _unencodable(text: str | None) -> str | None:
    """Why a message's JSON cannot travel back as UTF-8, or None."""
    if text is None or "\\u" not in text:
        return None
    try:
        json.dumps(json.loads(text), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as error:
        return f"the message holds a lone surrogate ({error.object[error.start]!r}): send valid Unicode"
    except ValueError:  # not JSON: OpenEnv answers INVALID_JSON
        return None
    return None


def _ws_error(message: str, code: str) -> str:
    return WSErrorResponse(data={"message": message, "code": code}).model_dump_json()


def _ws_error_code(text: str | None) -> tuple[str | None, str]:
    """(code, message) of an OpenEnv error response, else (None, "")."""
    if not text or not text.startswith('{"type":"error"'):
        return None, ""
    data = json.loads(text).get("data", {})
    return data.get("code"), str(data.get("message", ""))


async def _request_error(request: Request, error: Exception) -> JSONResponse:
    status = getattr(error, "status_code", 400)
    return JSONResponse({"detail": str(error)}, status_code=status)


async def _server_error(request: Request, error: Exception) -> JSONResponse:
    logger.error("%s %s failed", request.method, request.url.path, exc_info=error)
    return JSONResponse(
        {"detail": f"server error: {type(error).__name__}: {error}"}, status_code=500
    )


def _check_environment(config: ServeConfig) -> None:
    env = gym.make(env_id_for(config.task), **config.env_kwargs)
    try:
        logger.info("%s: %d task instances", config.task, env.unwrapped.num_tasks)  # type: ignore[attr-defined]
    finally:
        env.close()
