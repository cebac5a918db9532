"""Serving beyond loopback: a token on every route (WebSocket included), or an explicit
``--no-auth``, and a warning either way."""

from __future__ import annotations

import logging

import httpx
import pytest

pytest.importorskip("openenv", reason="openenv-core is not installed (the serve extra)")

from openenv.core.generic_client import GenericEnvClient
from support.serving_support import thread_server

from agentgym_eppo.serving.server import ServeConfig, bind
from agentgym_eppo.trainer.cli import main

TOKEN = "s3cret-token-for-the-test"


def test_serving_beyond_loopback_needs_a_token_or_no_auth(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ValueError, match=r"serving on 0\.0\.0\.0 .*give a token .*--no-auth"):
        ServeConfig(task="os", host="0.0.0.0")
    with pytest.raises(ValueError, match=r"at least 16 characters"):
        ServeConfig(task="os", host="0.0.0.0", token="short")
    assert ServeConfig(task="os", host="0.0.0.0", token=TOKEN).token == TOKEN
    assert ServeConfig(task="os", host="0.0.0.0", no_auth=True).no_auth
    assert ServeConfig(task="os", host="::1").token is None  # loopback needs none
    assert TOKEN not in repr(ServeConfig(task="os", token=TOKEN))
    assert main(["serve", "--task", "os", "--host", "0.0.0.0"]) == 1
    assert "give a token (--token, or the AGENTGYM_EPPO_SERVE_TOKEN" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("token", "says"), [(TOKEN, "the token, which travels"), (None, "WITHOUT")]
)
def test_serving_beyond_loopback_warns(
    caplog: pytest.LogCaptureFixture, token: str | None, says: str
) -> None:
    config = ServeConfig(task="db", host="0.0.0.0", port=0, token=token, no_auth=token is None)
    with caplog.at_level(logging.WARNING, logger="agentgym_eppo.serving.server"):
        _, sock, _ = bind(config)  # bound, never listening
    sock.close()
    assert any(says in record.getMessage() for record in caplog.records)


def test_the_token_is_checked_on_every_route() -> None:
    with thread_server("db", token=TOKEN) as url:
        authed = url.replace("http://", f"http://agentgym:{TOKEN}@")
        wrong = url.replace("http://", "http://agentgym:not-the-token-at-all@")
        for method, path in [
            ("GET", "/health"),
            ("GET", "/sessions"),
            ("GET", "/schema"),
            ("GET", "/state"),
            ("POST", "/reset"),
            ("POST", "/step"),
            ("POST", "/mcp"),
        ]:
            for base, headers in [(url, {}), (wrong, {}), (url, {"authorization": "Bearer x"})]:
                response = httpx.request(method, f"{base}{path}", json={}, headers=headers)
                assert response.status_code == 401, (method, path)
                assert "needs its token" in response.json()["detail"]
        assert httpx.get(f"{authed}/health").status_code == 200
        bearer = {"authorization": f"Bearer {TOKEN}"}
        assert httpx.post(f"{url}/reset", json={}, headers=bearer, timeout=30).status_code == 200

        for base in (url, wrong):
            with (
                pytest.raises(ConnectionError, match=r"HTTP 401"),
                GenericEnvClient(base_url=base).sync() as client,
            ):
                client.reset()
        # OpenEnv's own client sends the token from the URL
        with GenericEnvClient(base_url=authed).sync() as client:
            assert client.reset(index=0).observation["info"]["status"] == "running"
