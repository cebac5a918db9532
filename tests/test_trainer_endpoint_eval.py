"""``evaluate_endpoint`` speaks OpenAI's chat-completions protocol to a server on loopback."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import trainer_test_envs  # noqa: F401  (registers the test tasks)

from agentgym_eppo.trainer.rollout.openai_endpoint import evaluate_endpoint


class ScriptedChatServer(ThreadingHTTPServer):
    """Answers ``POST /v1/chat/completions`` like a served model that always calls ``say``
    with the last word of the user's task text ("Say apple." -> "apple."[:-1])."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict] = []


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedChatServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), **body}
        )
        word = body["messages"][1]["content"].split()[-1].rstrip(".")
        if word == "tiger":  # answer this one in plain text, with no call in it
            message = {"role": "assistant", "content": "I do not know."}
        else:
            call = {
                "id": "call_1",
                "type": "function",
                "function": {"name": "say", "arguments": json.dumps({"word": word})},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        payload = json.dumps({"choices": [{"index": 0, "message": message}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    httpd = ScriptedChatServer()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def test_endpoint_eval_scores_tool_calls_and_text_answers(server, monkeypatch):
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    result = evaluate_endpoint(url, "tiny", ["trainer_test_envs:Echo-v0"], split="dev", api_key="k")
    # dev words: apple, ocean, tiger -> two right calls, one text reply without a call
    echo = result["tasks"]["echo"]
    assert echo["n"] == 3
    assert echo["success"] == pytest.approx(2 / 3)
    assert echo["statuses"] == {"completed": 2, "agent_invalid_action": 1}
    assert result["mean_success"] == pytest.approx(2 / 3)
    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions"
    assert first["auth"] == "Bearer k"
    assert first["model"] == "tiny" and first["temperature"] == 0.0
    assert first["tools"][0]["function"]["name"] == "say"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
