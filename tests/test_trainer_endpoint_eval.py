"""``evaluate_endpoint`` speaks OpenAI's chat-completions protocol to a server on loopback."""

from __future__ import annotations

import pytest
from support import trainer_test_envs  # noqa: F401  (registers the test tasks)
from support.chat_servers import echo_but_tiger

from agentgym_eppo.trainer.rollout.openai_endpoint import evaluate_endpoint


def test_endpoint_eval_scores_tool_calls_and_text_answers(serve_chat):
    server = serve_chat(echo_but_tiger)  # a model that says the word, except "tiger"
    result = evaluate_endpoint(
        server.url, "tiny", ["support.trainer_test_envs:Echo-v0"], split="dev", api_key="k"
    )
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
