"""A scripted OpenAI-compatible model that plays the expert's calls, for the ``verifiers``
tests and the examples in ``docs/verifiers.md``.

:class:`ExpertBook` plays the expert of each chosen instance in-process
(``env.unwrapped.expert_action()``) and keeps its calls and what the episode earned, by
the instance's task text. :func:`expert_reply` answers a chat request as the model named
in it (``model``):

- ``expert``: the expert's next call, found by the task text of the request's first user
  message (the text itself, or the ``observation.text`` of the JSON ``verifiers``'
  ``openenv`` taskset sends) and the number of assistant turns so far: a native tool call
  when the request offers ``tools``, else the call as a Hermes ``<tool_call>`` block;
- ``expert-json``: the same call as bare JSON text;
- ``prose``, ``malformed-json``, ``unknown-tool``: replies the env cannot act on (see
  :data:`BAD_REPLIES`; the unknown tool's text is a bare JSON call), as text, or as
  native tool calls where tools are offered.

A streamed request (``"stream": true``, as ``verifiers``' ``null`` harness sends) is
answered as server-sent events, any other as one JSON completion.

Run as a script it serves the expert of the dev instances it is given::

    python tests/support/expert_model.py --port 8001 --tasks db kg --indices 0 1
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

BAD_REPLIES: dict[str, dict[str, Any]] = {
    "prose": {"text": "I would look the answer up in the table first."},
    "malformed-json": {
        "text": '<tool_call>{"name": "execute_sql", "arguments": {"query": </tool_call>',
        "call": {"name": "execute_sql", "arguments": '{"query": '},
    },
    "unknown-tool": {
        "text": '{"name": "drop_everything", "arguments": {}}',
        "call": {"name": "drop_everything", "arguments": "{}"},
    },
}
"""What each scripted bad model writes: its text reply, and its native call where tools
are offered (prose has none: a model that writes prose writes it there too)."""


@dataclass
class Episode:
    """One instance played by the expert in-process."""

    task: str
    index: int
    text: str
    calls: list[dict[str, Any]]
    reward: float
    status: str


@dataclass
class ExpertBook:
    """The expert's episodes, by task text."""

    split: str = "dev"
    episodes: dict[str, Episode] = field(default_factory=dict)

    def play(self, task: str, index: int, **env_kwargs: Any) -> Episode:
        """Play the expert on ``task``'s instance ``index`` in-process and keep it."""
        import agentgym_eppo  # noqa: F401  (registers the ids)
        from agentgym_eppo.registration import env_id_for

        env = gym.make(env_id_for(task), split=self.split, **env_kwargs)
        try:
            text, info = env.reset(options={"index": index})
            calls, reward, done = [], 0.0, False
            while not done:
                call = env.unwrapped.expert_action()  # type: ignore[attr-defined]
                calls.append(call)
                _, step_reward, terminated, truncated, info = env.step(call)
                reward, done = reward + float(step_reward), terminated or truncated
        finally:
            env.close()
        episode = Episode(task, index, str(text), calls, reward, str(info["status"]))
        self.episodes[episode.text] = episode
        return episode

    def next_call(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        opening = next(message["content"] for message in messages if message["role"] == "user")
        episode = self.episodes[task_text(opening)]
        turn = sum(message["role"] == "assistant" for message in messages)
        return dict(episode.calls[turn])


def task_text(opening: Any) -> str:
    """The task text in a conversation's first user message (``verifiers``' ``openenv``
    taskset sends the observation as JSON)."""
    if isinstance(opening, list):  # content parts
        opening = "".join(part.get("text", "") for part in opening)
    try:
        payload = json.loads(opening)
    except (TypeError, ValueError):
        return str(opening)
    if isinstance(payload, dict) and isinstance(payload.get("observation"), dict):
        return str(payload["observation"]["text"])
    return str(opening)


def expert_reply(book: ExpertBook) -> Any:
    """A :class:`~support.chat_servers.ChatServer` reply playing the model each request
    names (see the module docstring)."""

    def reply(handler: Any, body: dict[str, Any], number: int) -> None:
        model, native = str(body.get("model")), bool(body.get("tools"))
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if model in BAD_REPLIES:
            bad = BAD_REPLIES[model]
            if native and "call" in bad:
                message["tool_calls"] = [_tool_call(bad["call"], number)]
            else:
                message["content"] = bad["text"]
        else:
            call = book.next_call(body)
            if model == "expert-json":
                message["content"] = json.dumps(call)
            elif native:
                message["tool_calls"] = [_tool_call(call, number)]
            else:
                message["content"] = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
        if body.get("stream"):
            _stream(handler, model, message)
        else:
            handler.send(json.dumps(_completion(model, message)).encode())

    return reply


def _tool_call(call: dict[str, Any], number: int) -> dict[str, Any]:
    arguments = call["arguments"]
    return {
        "id": f"call_{number}",
        "type": "function",
        "function": {
            "name": call["name"],
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def _completion(model: str, message: dict[str, Any]) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-expert",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": USAGE,
    }


def _stream(handler: Any, model: str, message: dict[str, Any]) -> None:
    delta = {key: value for key, value in message.items() if value is not None}
    for call_index, call in enumerate(delta.get("tool_calls", [])):
        call["index"] = call_index
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    chunks = [
        {"index": 0, "delta": delta, "finish_reason": None},
        {"index": 0, "delta": {}, "finish_reason": finish},
    ]
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()
    for choice in chunks:
        event = {
            "id": "chatcmpl-expert",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [choice],
        }
        handler.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
    usage = {"id": "chatcmpl-expert", "object": "chat.completion.chunk", "created": 0}
    usage |= {"model": model, "choices": [], "usage": USAGE}
    handler.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
    handler.close_connection = True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--split", default="dev")
    parser.add_argument("--tasks", nargs="+", default=["os", "db", "kg", "alfworld", "webshop"])
    parser.add_argument("--indices", nargs="+", type=int, default=[0])
    args = parser.parse_args(argv)
    from support.chat_servers import ChatServer

    book = ExpertBook(args.split)
    for task in args.tasks:
        for index in args.indices:
            book.play(task, index, **({"prestart": False} if task == "os" else {}))
    server = ChatServer(expert_reply(book), port=args.port)
    print(f"expert model for {len(book.episodes)} episodes at {server.url}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support.*
    main()
