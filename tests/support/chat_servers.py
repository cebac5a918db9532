"""A scripted OpenAI-compatible chat server on loopback, for the tests of ``eval --endpoint``.

A real ``http.server`` in a thread. Each request is answered by a *reply* function,
``reply(handler, body, number)``, given the parsed request body and the request's number
(from 0); the server keeps every request (path, method, ``Authorization`` header and
body) in :attr:`ChatServer.requests`. Tests start servers with the ``serve_chat`` fixture
of ``tests/conftest.py``, or with :func:`chat_server` where the server must outlive one
test.

The replies for the trainer's ``echo`` task (dev words apple, ocean, tiger): :func:`echo`
``say``-s the last word of the task text, :func:`echo_but_tiger` answers "tiger" in plain
text, with no call in it.

A request body is read by its ``Content-Type`` (:data:`BODY_READERS`; JSON otherwise), so
the same server also plays other scripted loopback services whose answers misbehave: a
form-encoded SPARQL query to the KG env's endpoint arrives as ``{"query": ...}``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[["ChatHandler", dict[str, Any], int], None]
"""Answers request number ``n`` (from 0) with body ``body`` through the handler."""


def _form(raw: bytes) -> dict[str, Any]:
    return {key: values[-1] for key, values in urllib.parse.parse_qs(raw.decode()).items()}


BODY_READERS: dict[str, Callable[[bytes], dict[str, Any]]] = {
    "application/x-www-form-urlencoded": _form,  # e.g. a SPARQL endpoint's query
}
"""How a request body of each content type is read; any other is JSON."""


class ChatServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, reply: Reply, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), ChatHandler)
        self.reply = reply
        self.requests: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        """The base URL a client is given (``.../v1``)."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class ChatHandler(BaseHTTPRequestHandler):
    server: ChatServer

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        read = BODY_READERS.get(self.headers.get_content_type(), json.loads)
        body = read(self.rfile.read(length)) if length else {}
        number = len(self.server.requests)
        self.server.requests.append(
            {
                "path": self.path,
                "method": self.command,
                "auth": self.headers.get("Authorization"),
                **body,
            }
        )
        with contextlib.suppress(OSError):  # the client hung up, as it should on an attack
            self.server.reply(self, body, number)

    do_POST = do_GET = _answer

    def send(self, payload: bytes, status: int = 200, length: bool = True) -> None:
        """Answer ``payload`` as JSON; without ``length`` the body ends when the connection
        closes."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if length:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        """Quiet: the tests read ``server.requests``."""


@contextlib.contextmanager
def chat_server(reply: Reply) -> Iterator[ChatServer]:
    """A :class:`ChatServer` answering with ``reply``, serving until the block ends."""
    server = ChatServer(reply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def completion(message: dict[str, Any]) -> bytes:
    """A chat-completions answer holding the one assistant ``message``."""
    return json.dumps({"choices": [{"index": 0, "message": message}]}).encode()


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> bytes:
    """An answer that calls the tool ``name`` with ``arguments`` and says nothing else."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return completion({"role": "assistant", "content": None, "tool_calls": [call]})


def echo_word(body: dict[str, Any]) -> str:
    """The word the echo task asks for: the last of the task text ("Say apple." -> apple)."""
    return str(body["messages"][1]["content"].split()[-1].rstrip("."))


def says_the_word(body: dict[str, Any]) -> bytes:
    """A right answer for the echo task: ``say`` the word of the task text."""
    return tool_call("say", {"word": echo_word(body)})


def echo(handler: ChatHandler, body: dict[str, Any], number: int) -> None:
    """A model that answers every echo episode right."""
    handler.send(says_the_word(body))


def echo_but_tiger(handler: ChatHandler, body: dict[str, Any], number: int) -> None:
    """A model that answers the echo task right, except "tiger", answered in plain text."""
    if echo_word(body) == "tiger":
        handler.send(completion({"role": "assistant", "content": "I do not know."}))
    else:
        handler.send(says_the_word(body))
