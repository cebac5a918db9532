"""OpenEnv's ``HTTPEnvServer`` with one pool of session slots for every route.

OpenEnv's server counts its WebSocket sessions against ``max_sessions``, but builds a
throw-away environment for each stateless ``POST /reset`` outside that count (on the
event loop, closed there too), lets ``POST /mcp`` open sessions that no connection holds,
keeps a session alive on any message, and leaves the connection of a session it closed
for idling open. :class:`SessionServer` changes those four:

- a stateless ``POST /reset`` takes a slot like a session (503 when none is free),
  builds, resets and closes its environment in one worker thread of its own, and frees
  the slot;
- ``POST /mcp`` opens no session (``openenv/session/create`` is refused: the tasks have
  no MCP tools, so such a session could only hold a slot) and answers ``tools/list`` and
  ``tools/call`` with OpenEnv's "does not support MCP" error, building nothing;
- the idle timeout counts from the session's last reset or step, so that state queries
  and MCP messages do not keep a session alive;
- a session closed by the server (idle past the timeout, or the server stopping) has its
  WebSocket connection closed too, with the reason.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Body, FastAPI, HTTPException, Request
from fastapi.routing import APIRoute
from openenv.core.env_server.exceptions import SessionCapacityError
from openenv.core.env_server.http_server import HTTPEnvServer
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import JsonRpcErrorCode, JsonRpcRequest, JsonRpcResponse
from openenv.core.env_server.serialization import serialize_observation
from openenv.core.env_server.types import ResetRequest, ResetResponse, ServerMode
from pydantic import ValidationError

from .environment import AgentBenchEnvironment
from .guards import CONNECTION, Connection, clip_text
from .limits import MAX_ERROR_CHARS

SERVER_STOPPING = "the server is stopping: open a new session on a running server"
NO_MCP = (
    "this environment has no MCP tools: play episodes in a WebSocket session at /ws "
    "(reset, step, state); POST /mcp opens no session"
)

_RESET_BODY = Body(default_factory=ResetRequest)  # optional: an empty POST /reset is valid


class SessionServer(HTTPEnvServer):
    """OpenEnv's server, with one slot pool for sessions and stateless resets, the idle
    timeout on real activity and reaped connections closed (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections: dict[str, Connection] = {}

    def register_routes(self, app: FastAPI, mode: ServerMode | str = ServerMode.SIMULATION) -> None:
        """OpenEnv's routes, with ``POST /reset`` and ``POST /mcp`` replaced."""
        super().register_routes(app, mode)
        replaced = {"/reset", "/mcp"}
        app.router.routes[:] = [
            route
            for route in app.router.routes
            if not (
                isinstance(route, APIRoute) and route.path in replaced and route.methods == {"POST"}
            )
        ]

        @app.post("/reset", response_model=ResetResponse, tags=["Environment Control"])
        async def reset(request: ResetRequest = _RESET_BODY) -> ResetResponse:
            """A first observation from a throw-away environment (episodes are played in
            WebSocket sessions at /ws). Takes a session slot while it runs: 503 when none
            is free."""
            return await self.stateless_reset(request.model_dump(exclude_unset=True))

        @app.post("/mcp")
        async def mcp(request: Request) -> dict[str, Any]:
            """MCP JSON-RPC: the tasks have no MCP tools, so every method is answered
            with an error and no session is opened."""
            try:
                call = JsonRpcRequest(**json.loads(await request.body()))
            except ValidationError as error:
                message = f"Invalid request: {clip_text(str(error), MAX_ERROR_CHARS)}"
                return JsonRpcResponse.error_response(
                    JsonRpcErrorCode.INVALID_REQUEST, message
                ).model_dump()
            except (ValueError, TypeError):
                return JsonRpcResponse.error_response(JsonRpcErrorCode.PARSE_ERROR).model_dump()
            return JsonRpcResponse.error_response(
                JsonRpcErrorCode.INTERNAL_ERROR, NO_MCP, request_id=call.id
            ).model_dump()

    async def stateless_reset(self, kwargs: dict[str, Any]) -> ResetResponse:
        """Reset a throw-away environment in a slot of its own; the environment is built,
        reset and closed in the slot's one worker thread (a DB env's SQLite connection
        may only be used by the thread that made it)."""
        try:
            session_id, env = await self._create_session()
        except SessionCapacityError as error:
            raise HTTPException(
                503,
                detail=f"{error} (WebSocket sessions and stateless resets share the slots): "
                "retry later",
                headers={"Retry-After": "1"},
            ) from None
        try:
            observation = await self._run_in_session_executor(session_id, env.reset, **kwargs)
            return ResetResponse(**serialize_observation(observation))
        finally:
            await self._destroy_session(session_id)

    async def _create_session(self) -> tuple[str, Environment]:
        session_id, env = await super()._create_session()
        connection = CONNECTION.get()
        if connection is not None:
            self._connections[session_id] = connection
        return session_id, env

    async def _destroy_session(self, session_id: str, reason: str | None = None) -> None:
        """Free the session; if its connection is still open (the server closes the
        session on its own), close it with ``reason`` (by default: it idled)."""
        connection = self._connections.pop(session_id, None)
        await super()._destroy_session(session_id)
        if connection is not None:
            connection.end(reason or self._idle_reason())

    async def close_all(self) -> None:
        """Free every session and close their connections (the server is stopping)."""
        for session_id in list(self._sessions):
            await self._destroy_session(session_id, SERVER_STOPPING)

    def _update_session_activity(self, session_id: str, increment_step: bool = False) -> None:
        # OpenEnv calls this after a reset, a step and any MCP call; the session's last
        # activity is its environment's last reset or step, whatever the message was
        info = self._session_info.get(session_id)
        env = self._sessions.get(session_id)
        if info is None or not isinstance(env, AgentBenchEnvironment):
            return
        info.last_activity_at = env.last_active
        info.step_count = env.state.step_count

    def _idle_reason(self) -> str:
        return (
            f"the session was idle (no reset or step) for more than "
            f"{self._session_idle_timeout_s:g} s and is closed: open a new session"
        )
