"""What stands between the network and OpenEnv's routes: ASGI middlewares and the checks
they share.

- :class:`TokenGuard`: every HTTP request and WebSocket handshake carries the server's
  token, or is refused before it reaches a route;
- :class:`BodyLimit`: an HTTP body over the size limit is answered 413, one that JSON can
  hold and UTF-8 cannot (a lone surrogate) or that nests too deep 400, before a route
  reads it;
- :class:`WebSocketGuard`: a WebSocket message that is not a JSON object, nests too deep
  or holds a lone surrogate is answered with an error and the session goes on; errors
  sent back say what was wrong in the field OpenEnv's client shows, and quote the input
  only in part; a connection whose session the server closed is closed too.

>>> json_problem('[1, 2]', message=True)
'a message is a JSON object ({"type": "reset" | "step" | "state" | "close", "data": {...}}), got an array'
>>> json_problem('{"type": "step", "data": {"text": "\\\\ud800"}}', message=True)
"the message holds a lone surrogate ('\\\\ud800'): send valid Unicode"
>>> json_problem('{"type": "state"}', message=True) is None
True
>>> clip_text("abc" * 100, limit=6)
'abcabc... (300 characters in all)'
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import contextvars
import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any

from openenv.core.env_server.types import WSErrorCode, WSErrorResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect
from uvicorn.protocols.utils import ClientDisconnected

from .limits import MAX_ECHO_CHARS, MAX_ERROR_CHARS, MAX_JSON_DEPTH

_KINDS = {list: "an array", str: "a string", int: "a number", float: "a number"}
_MESSAGE_SHAPE = '{"type": "reset" | "step" | "state" | "close", "data": {...}}'


def json_problem(raw: str | bytes, *, message: bool) -> str | None:
    """Why the JSON in ``raw`` must not reach OpenEnv's routes, or None (also for what is
    not JSON at all: OpenEnv answers that itself). ``message``: a WebSocket message, which
    must be an object; an HTTP body's shape is the route's to check."""
    what = "the message" if message else "the body"
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    opens_object = text.lstrip().startswith("{")
    escapes = "\\u" in text
    if (opens_object or not message) and not escapes and _brackets(text) <= MAX_JSON_DEPTH:
        return None  # no surrogate escape, too few brackets to nest too deep
    try:
        value = json.loads(raw)
    except RecursionError:
        return f"{what} nests deeper than {MAX_JSON_DEPTH} levels"
    except ValueError:
        return None
    if message and not isinstance(value, dict):
        kind = "null" if value is None else _KINDS.get(type(value), "a boolean")
        return f"a message is a JSON object ({_MESSAGE_SHAPE}), got {kind}"
    if _depth(value) > MAX_JSON_DEPTH:
        return f"{what} nests deeper than {MAX_JSON_DEPTH} levels"
    if escapes:
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as error:
            character = error.object[error.start]
            return f"{what} holds a lone surrogate ({character!r}): send valid Unicode"
    return None


def _brackets(text: str) -> int:
    return text.count("{") + text.count("[")


def _depth(value: Any) -> int:
    """How deep ``value`` nests (a scalar: 0), without recursion."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, depth = pending.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
    return deepest


def clip_text(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters in all)"


def clip_errors(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic's errors with the client's input quoted in part (an action of a million
    characters is not sent back whole) and without pydantic's help links."""
    clipped = []
    for error in errors:
        entry = {key: value for key, value in error.items() if key not in ("url", "ctx")}
        if "input" in entry:
            value = entry["input"]
            if not isinstance(value, (int, float, bool)) and value is not None:
                shown = value if isinstance(value, str) else json.dumps(value, default=str)
                entry["input"] = clip_text(shown)
        clipped.append(entry)
    return clipped


def describe_errors(errors: Sequence[Mapping[str, Any]]) -> str:
    """Pydantic's errors as one line: where, and what is wrong there (an unknown tool's
    error names the task's tools)."""
    parts = []
    for error in errors[:5]:
        where = ".".join(str(part) for part in error.get("loc", ())) or "action"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return f"invalid message: {'; '.join(parts)}{more} (GET /schema shows the action)"


async def send_json(send: Send, status: int, body: Mapping[str, Any], **headers: str) -> None:
    """An HTTP response with a JSON body, from a middleware."""
    raw = [(b"content-type", b"application/json")]
    raw += [(name.encode(), value.encode()) for name, value in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


class TokenGuard:
    """Refuses every HTTP request and WebSocket handshake without the server's token,
    before any route sees it: ``Authorization: Bearer TOKEN``, or HTTP Basic with the
    token as the password (what ``http://agentgym:TOKEN@host:port`` makes an HTTP or
    WebSocket client send, OpenEnv's among them). Compared in constant time."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        detail = (
            "this server needs its token: connect to http://agentgym:TOKEN@host:port "
            "(HTTP Basic) or send 'Authorization: Bearer TOKEN'"
        )
        if scope["type"] == "http":
            await send_json(send, 401, {"detail": detail}, **{"www-authenticate": "Basic"})
            return
        await receive()  # websocket.connect
        if "websocket.http.response" in scope.get("extensions", {}):
            start = {"type": "websocket.http.response.start", "status": 401, "headers": []}
            await send(start)
            await send({"type": "websocket.http.response.body", "body": detail.encode()})
        else:
            await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})

    def _authorized(self, scope: Scope) -> bool:
        header = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, value = header.partition(b" ")
        given = b""
        if scheme.lower() == b"bearer":
            given = value.strip()
        elif scheme.lower() == b"basic":
            with contextlib.suppress(binascii.Error, ValueError):
                given = base64.b64decode(value.strip(), validate=True).partition(b":")[2]
        return hmac.compare_digest(given, self._token)


class BodyLimit:
    """Answers 413 to an HTTP request whose body exceeds ``max_bytes`` (declared or
    streamed), and 400 to one whose JSON holds a lone surrogate or nests deeper than
    :data:`~.limits.MAX_JSON_DEPTH` (the answer echoing it could not be encoded, the
    parser would recurse out of its stack: a 500 either way), before the app reads it;
    WebSocket messages are limited by uvicorn and checked by :class:`WebSocketGuard`."""

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
        problem = json_problem(b"".join(chunk.get("body", b"") for chunk in chunks), message=False)
        if problem is not None:
            await send_json(send, 400, {"detail": problem})
            return

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        detail = f"request body larger than the server's limit of {self.max_bytes} bytes"
        await send_json(send, 413, {"detail": detail})


class Connection:
    """One WebSocket connection, as the server's sessions see it: :meth:`end` closes it
    (the server calls it when it closes the connection's session on its own)."""

    def __init__(self) -> None:
        self.ended = asyncio.Event()
        self.reason = ""

    def end(self, reason: str) -> None:
        self.reason = reason
        self.ended.set()


CONNECTION: contextvars.ContextVar[Connection | None] = contextvars.ContextVar(
    "agentgym_eppo_connection", default=None
)
"""The WebSocket connection whose handler runs in this context (set by
:class:`WebSocketGuard`, read when the handler opens its session)."""

REFUSAL_WAIT_S = 10.0
_CAPACITY = WSErrorCode.CAPACITY_REACHED.value
_INVALID = WSErrorCode.VALIDATION_ERROR.value


class WebSocketGuard:
    """What OpenEnv's WebSocket endpoints need around them to serve every client cleanly.

    - A message that is not a JSON object (an array, a number, a string, null), nests
      deeper than :data:`~.limits.MAX_JSON_DEPTH` or holds a lone surrogate: OpenEnv
      would end the session with ``SESSION_ERROR`` (or echo what cannot be encoded, which
      ends it too). Here it is answered with ``VALIDATION_ERROR`` and never reaches the
      session, which goes on; so is a binary message.
    - A ``VALIDATION_ERROR``: OpenEnv puts "Invalid message" in ``message``, the field its
      client shows, and pydantic's errors (with the input, whole) beside it. Here
      ``message`` says what was wrong where, and the errors quote the input in part.
      Every error message is cut at :data:`~.limits.MAX_ERROR_CHARS`.
    - A session over the limit: OpenEnv sends its ``CAPACITY_REACHED`` error and closes
      at once, before the client has sent anything, so the client's first ``send`` meets
      a closed connection and reports only that. Here the close waits (up to
      :data:`REFUSAL_WAIT_S`) for the client's first message, so that the client reads
      the error as its answer, and carries code 1013 (try again later) and the reason.
    - A session the server closes on its own (idle past the timeout, the server
      stopping): OpenEnv frees the session and leaves its connection open. Here the
      connection is closed (code 1000, the reason given) and the handler told that the
      peer left.
    - A peer that leaves while its session closes is the end of that session, not a
      server error.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        connection = Connection()
        refusal: list[str] = []
        closed = False
        ended = asyncio.ensure_future(connection.ended.wait())

        async def guarded_receive() -> Message:
            nonlocal closed
            while True:
                receiving = asyncio.ensure_future(receive())
                await asyncio.wait({receiving, ended}, return_when=asyncio.FIRST_COMPLETED)
                if not receiving.done():
                    receiving.cancel()
                    if not closed:
                        closed = True
                        reason = connection.reason[:120]
                        await send({"type": "websocket.close", "code": 1000, "reason": reason})
                    return {"type": "websocket.disconnect", "code": 1000}
                message = receiving.result()
                if message["type"] != "websocket.receive":
                    return message
                if message.get("text") is None:
                    problem: str | None = f"send text messages: a JSON object ({_MESSAGE_SHAPE})"
                else:
                    problem = json_problem(message["text"], message=True)
                if problem is None:
                    return message
                await send({"type": "websocket.send", "text": _ws_error(problem, _INVALID)})

        async def guarded_send(message: Message) -> None:
            nonlocal closed
            if closed:  # the guard closed the connection: what the handler sends is moot
                return
            if message["type"] == "websocket.send":
                message = _readable_error(message, refusal)
            elif message["type"] == "websocket.close":
                closed = True
                if refusal:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(receive(), REFUSAL_WAIT_S)
                    message = {**message, "code": 1013, "reason": refusal[0][:120]}
            await send(message)

        token = CONNECTION.set(connection)
        try:
            with contextlib.suppress(WebSocketDisconnect, ClientDisconnected):
                await self.app(scope, guarded_receive, guarded_send)
        finally:
            CONNECTION.reset(token)
            ended.cancel()


def _readable_error(message: Message, refusal: list[str]) -> Message:
    """An outgoing message, with an OpenEnv error made readable and short."""
    text = message.get("text")
    if not text or not text.startswith('{"type":"error"'):
        return message
    data = json.loads(text).get("data", {})
    code = data.get("code")
    if code == _CAPACITY:
        refusal.append(str(data.get("message", "")))
    if code == _INVALID and isinstance(data.get("errors"), list):
        data["message"] = describe_errors(data["errors"])
        data["errors"] = clip_errors(data["errors"])
    data["message"] = clip_text(str(data.get("message", "")), MAX_ERROR_CHARS)
    return {**message, "text": WSErrorResponse(data=data).model_dump_json()}


def _ws_error(message: str, code: str) -> str:
    return WSErrorResponse(data={"message": message, "code": code}).model_dump_json()
