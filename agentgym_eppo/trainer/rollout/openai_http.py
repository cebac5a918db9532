"""A bounded client for OpenAI's chat-completions API: one POST, one checked message.

The server is not trusted: a request is bounded in time and size whatever it does
(:class:`EndpointLimits`), follows no redirect, and every failure (unreachable, HTTP
error, too slow, too large, not UTF-8, not JSON, nested too deeply, not a chat
completion) is one :class:`EndpointError` line naming the URL. This module imports only
the standard library, so the CLI can read the limits' defaults cheaply.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any


class EndpointError(RuntimeError):
    """The endpoint could not be reached, or did not answer as an OpenAI chat API within
    the request's bounds (:class:`EndpointLimits`)."""


@dataclass(frozen=True)
class EndpointLimits:
    """What one chat request may cost, whatever the server does.

    ``deadline_s`` bounds the whole request (connect, send, the reply's headers and body),
    not each read, so a server that drips its answer is cut off on time. ``max_body_bytes``
    caps the reply read into memory. ``max_consecutive_failures`` failed requests in a row
    end the evaluation (the rest of the instances are not played, and the result says so),
    so a dead server costs a few deadlines rather than one per instance.

    Redirects are never followed (the API key would go to wherever the server points):
    a 3xx answer is an error that names the target, to be given as the URL instead.
    Proxy settings of the environment are not used.

    >>> EndpointLimits(deadline_s=0)
    Traceback (most recent call last):
    ...
    ValueError: EndpointLimits.deadline_s must be > 0, got 0
    """

    deadline_s: float = 300.0
    max_body_bytes: int = 8 * 2**20
    max_consecutive_failures: int = 3

    def __post_init__(self) -> None:
        for name in ("deadline_s", "max_body_bytes", "max_consecutive_failures"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"EndpointLimits.{name} must be > 0, got {value}")


DEFAULT_LIMITS = EndpointLimits()


def chat_completion(
    base_url: str,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    api_key: str | None = None,
    temperature: float = 0.0,
    max_tokens: int = 1024,
    limits: EndpointLimits = DEFAULT_LIMITS,
) -> dict[str, Any]:
    """POST ``/chat/completions`` (OpenAI's schema) and return the first choice's message:
    a dict whose ``content`` is a string or None and whose ``tool_calls`` (if any) is a
    list of objects. Anything else, and every failure within ``limits``, raises
    :class:`EndpointError` with one line naming the URL."""
    body = json.dumps(
        {
            "model": model,
            "messages": messages,
            "tools": tools,
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
    ).encode("utf-8")
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"} | (
        {"Authorization": f"Bearer {api_key}"} if api_key else {}
    )
    data = _post(url, body, headers, limits)
    try:
        reply = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise EndpointError(f"{url} answered bytes that are not UTF-8") from None
    except json.JSONDecodeError as error:
        raise EndpointError(f"{url} answered something that is not JSON ({error.msg})") from None
    except RecursionError:
        raise EndpointError(f"{url} answered JSON nested too deeply to read") from None
    return _first_message(url, reply)


def _first_message(url: str, reply: Any) -> dict[str, Any]:
    """``reply["choices"][0]["message"]``, checked to have the shape the rollout reads."""
    try:
        message = reply["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        message = None
    if not isinstance(message, dict):
        raise EndpointError(
            f"{url} answered without choices[0].message (not an OpenAI chat completion)"
        )
    content, calls = message.get("content"), message.get("tool_calls")
    if content is not None and not isinstance(content, str):
        raise EndpointError(f"{url} answered a message whose content is not a string")
    if calls is not None and not (
        isinstance(calls, list) and all(isinstance(call, dict) for call in calls)
    ):
        raise EndpointError(f"{url} answered a message whose tool_calls is not a list of objects")
    return dict(message)


def _post(url: str, body: bytes, headers: dict[str, str], limits: EndpointLimits) -> bytes:
    """The body of a 2xx answer to POST ``url``, read within ``limits``."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # raises on a port that is not a number
    except ValueError as error:
        raise EndpointError(f"{url}: not a valid URL ({error})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointError(f"{url}: not an http(s) URL")
    connection_class = (
        http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    )
    connection = connection_class(parts.hostname, port, timeout=limits.deadline_s)
    # The socket timeout bounds each operation; the watchdog bounds their sum by shutting
    # the socket down, which wakes a read blocked on a server that sends a byte at a time.
    expired = threading.Event()
    watchdog = threading.Timer(limits.deadline_s, _cut, (connection, expired))
    watchdog.daemon = True
    watchdog.start()
    try:
        connection.connect()
        if expired.is_set():  # the watchdog fired before the socket existed
            raise TimeoutError
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        connection.request("POST", path, body, headers)
        response = connection.getresponse()
        if 300 <= response.status < 400:
            raise EndpointError(
                f"{url} answered HTTP {response.status} redirecting to "
                f"{response.getheader('Location', '?')!r}; redirects are not followed "
                "(they would carry the API key): give the final URL"
            )
        data = _read_capped(url, response, limits.max_body_bytes)
        if expired.is_set():  # the cut ends a read as if the answer were complete
            raise TimeoutError
        if response.length:  # bytes the Content-Length promised that never came
            raise EndpointError(f"{url} closed the connection before the end of its answer")
        if response.status >= 400:
            answer = data[:200].decode("utf-8", "replace").strip().replace("\n", " ")
            raise EndpointError(
                f"{url} answered HTTP {response.status}: {answer or response.reason}"
            )
        return data
    except (OSError, http.client.HTTPException, ValueError) as error:
        if expired.is_set() or isinstance(error, TimeoutError):
            raise EndpointError(
                f"{url} did not answer within the {limits.deadline_s:g} s request deadline"
            ) from None
        raise EndpointError(f"cannot reach {url}: {error or type(error).__name__}") from None
    finally:
        watchdog.cancel()
        connection.close()


def _cut(connection: http.client.HTTPConnection, expired: threading.Event) -> None:
    expired.set()
    if connection.sock is not None:
        with contextlib.suppress(OSError):  # already closed
            connection.sock.shutdown(socket.SHUT_RDWR)


def _read_capped(url: str, response: http.client.HTTPResponse, cap: int) -> bytes:
    declared = response.getheader("Content-Length", "")
    too_long = EndpointError(f"{url} answered more than the {cap}-byte body cap")
    if declared.strip().isdigit() and int(declared) > cap:
        raise too_long
    chunks: list[bytes] = []
    size = 0
    while chunk := response.read(min(65536, cap + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            raise too_long
    return b"".join(chunks)
