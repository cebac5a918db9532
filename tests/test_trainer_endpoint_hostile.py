"""``eval --endpoint`` against hostile servers on loopback: each attack costs at most the
episode it hits, within the stated bounds, and the finished episodes are kept.

Every server is a real ``http.server`` in a thread. The task is the trainer's ``echo``
(dev words apple, ocean, tiger: one request per episode when the model calls ``say``).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support import trainer_test_envs  # noqa: F401  (registers the test tasks)
from support.chat_servers import ChatHandler, ChatServer, echo, says_the_word

from agentgym_eppo.trainer.cli import main
from agentgym_eppo.trainer.rollout.openai_endpoint import (
    ENDPOINT_ERROR,
    EndpointError,
    EndpointLimits,
    chat_completion,
    evaluate_endpoint,
)

ECHO = "support.trainer_test_envs:Echo-v0"
KEY = "secret-key"


def run(server: ChatServer, **limits: Any) -> dict:
    return evaluate_endpoint(server.url, "m", [ECHO], api_key=KEY, limits=EndpointLimits(**limits))


def test_a_redirect_to_another_origin_is_not_followed_and_the_key_stays(serve_chat):
    elsewhere = serve_chat(echo)
    target = elsewhere.url + "/chat/completions"

    def redirect(handler: ChatHandler, body: dict, number: int) -> None:
        handler.send_response(302)
        handler.send_header("Location", target)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    result = run(serve_chat(redirect))
    assert elsewhere.requests == []  # nothing, and so no key, reached the other origin
    assert result["partial"] and result["episodes"] == []
    error = result["failed"][0]["error"]
    assert "HTTP 302" in error and target in error and "not followed" in error


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "close-delimited"])
def test_a_body_over_the_cap_fails_its_episode_only(serve_chat, declared):
    def large(handler: ChatHandler, body: dict, number: int) -> None:
        payload = says_the_word(body)
        if number == 0:  # a valid answer, padded past the cap
            payload = payload[:-1] + b" " * 200_000 + b"}"
        handler.send(payload, length=declared)

    result = run(serve_chat(large), max_body_bytes=50_000)
    assert [f["sample_id"] for f in result["failed"]] == ["dev-0"]
    assert "50000-byte body cap" in result["failed"][0]["error"]
    assert result["tasks"]["echo"]["n"] == 2 and result["tasks"]["echo"]["success"] == 1.0


@pytest.mark.parametrize("phase", ["headers", "body"])
def test_a_server_that_drips_its_answer_is_cut_off_at_the_request_deadline(serve_chat, phase):
    finished = threading.Event()

    def drip(handler: ChatHandler, body: dict, number: int) -> None:
        payload = says_the_word(body)
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(payload)}\r\n\r\n".encode()
        if phase == "body":
            handler.wfile.write(head)
            head = b""
        for byte in head + payload:  # each byte well within any per-read timeout
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.02)
        finished.set()

    result = run(serve_chat(drip), deadline_s=0.5, max_consecutive_failures=1)
    assert not finished.is_set()  # the client hung up before the answer was complete
    assert result["failed"][0]["error"].endswith("did not answer within the 0.5 s request deadline")
    assert result["stopped"] == "1 endpoint failures in a row"
    assert result["not_played"] == {"echo": 2}


MALFORMED = {
    "not JSON": (b"{'choices': []}", "is not JSON"),
    "nested too deeply": (b"[" * 200_000, "nested too deeply"),
    "not UTF-8": (b'{"choices": "\xff\xfe"}', "not UTF-8"),
    "message not an object": (b'{"choices": [{"message": "ab"}]}', "without choices[0].message"),
    "content not a string": (
        b'{"choices": [{"message": {"content": {"a": 1}}}]}',
        "content is not a string",
    ),
    "tool_calls not a list": (
        b'{"choices": [{"message": {"content": null, "tool_calls": "say"}}]}',
        "tool_calls is not a list of objects",
    ),
    "a call not an object": (
        b'{"choices": [{"message": {"content": null, "tool_calls": ["say"]}}]}',
        "tool_calls is not a list of objects",
    ),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_reply_is_one_clear_error_for_its_episode(serve_chat, name):
    payload, reason = MALFORMED[name]

    def malformed(handler: ChatHandler, body: dict, number: int) -> None:
        handler.send(payload if number == 0 else says_the_word(body))

    server = serve_chat(malformed)
    result = run(server)
    [failed] = result["failed"]
    assert failed["sample_id"] == "dev-0" and failed["status"] == ENDPOINT_ERROR
    assert (
        failed["error"].startswith(f"{server.url}/chat/completions ") and reason in failed["error"]
    )
    assert "\n" not in failed["error"]
    assert result["tasks"]["echo"]["n"] == 2  # the other two episodes were played


def test_an_answer_cut_short_of_its_content_length_is_one_clear_error(serve_chat):
    def short(handler: ChatHandler, body: dict, number: int) -> None:
        payload = says_the_word(body)
        if number == 0:  # promises more than it sends, then closes
            handler.send_response(200)
            handler.send_header("Content-Length", str(len(payload) + 100))
            handler.end_headers()
            handler.wfile.write(payload)
        else:
            handler.send(payload)

    result = run(serve_chat(short))
    [failed] = result["failed"]
    assert failed["error"].endswith("closed the connection before the end of its answer")
    assert result["tasks"]["echo"]["n"] == 2


def test_a_server_failing_after_a_good_reply_keeps_the_finished_episode(
    serve_chat, tmp_path, capsys
):
    def fails_later(handler: ChatHandler, body: dict, number: int) -> None:
        if number == 0:
            handler.send(says_the_word(body))
        else:
            handler.send(b'{"error": "overloaded"}', status=503)

    server = serve_chat(fails_later)
    output = tmp_path / "eval.json"
    code = main(["eval", "--endpoint", server.url, "--model", "m", "--tokenizer", "agentgym-tiny",
                 "--tasks", ECHO, "--max-failures", "1", "--output", str(output)])  # fmt: skip
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"agentgym-eppo eval: error: {server.url}/chat/completions answered")
    assert "HTTP 503" in err and "partial result: 1 episode(s) failed, 1 not played" in err
    written = json.loads(Path(output).read_text())
    assert written["partial"] is True
    assert [e["sample_id"] for e in written["episodes"]] == ["dev-0"]
    assert written["episodes"][0]["success"] is True
    assert [f["sample_id"] for f in written["failed"]] == ["dev-1"]
    assert written["not_played"] == {"echo": 1} and written["stopped"]


def test_the_bounds_are_checked_when_given(capsys):
    assert main(["eval", "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                 "--tasks", ECHO, "--request-deadline", "0"]) == 1  # fmt: skip
    assert "deadline_s must be > 0" in capsys.readouterr().err


@pytest.fixture
def python_sigint_handler():
    """Ctrl-C as a fresh ``agentgym-eppo eval`` process gets it (Python's own handler,
    which a library an earlier test loaded into this process may have replaced)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("python_sigint_handler")
def test_an_interrupt_writes_the_finished_episodes_as_a_partial_result(serve_chat, tmp_path):
    def interrupts_later(handler: ChatHandler, body: dict, number: int) -> None:
        if number == 1:  # Ctrl-C while the client waits for this answer
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        handler.send(says_the_word(body))

    server = serve_chat(interrupts_later)
    output = tmp_path / "eval.json"
    code = main(["eval", "--endpoint", server.url, "--model", "m", "--tasks", ECHO,
                 "--output", str(output)])  # fmt: skip
    assert code == 130
    written = json.loads(Path(output).read_text())
    assert written["partial"] is True and written["stopped"] == "interrupted"
    assert [e["sample_id"] for e in written["episodes"]] == ["dev-0"]
    assert written["failed"] == [] and written["not_played"] == {"echo": 2}


@pytest.mark.parametrize(
    ("url", "reason"),
    [("http://[::1/v1", "not a valid URL"), ("http://127.0.0.1:port/v1", "not a valid URL"),
     ("file:///etc/v1", r"not an http\(s\) URL")],
)  # fmt: skip
def test_a_url_that_is_not_http_is_one_clear_error(url, reason):
    with pytest.raises(EndpointError, match=reason):
        chat_completion(url, "m", [], [])
