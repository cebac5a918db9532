"""Honest statuses: what the action holds can end an episode only with an
agent status or come back as an ordinary observation, never as ``task_error``.

The trainer leaves ``task_error`` episodes out of the loss, so an agent mistake that
reads as an environment failure would dodge the abort penalty. Every tool of all five
environments (real backends; the OS env on its default sandbox) gets hostile content
in each of its arguments, then hypothesis-generated actions of every form.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from support.db_servers import MARIADB_URL, POSTGRES_URL, server_url

from agentgym_eppo.core import Status
from benchmarks.fuzz_tools import ENV_CLASSES, actions_for, check_step, env_class

ENV_KWARGS: dict[str, dict[str, Any]] = {"os": {"command_timeout": 5.0}}
HOSTILE: dict[str, Any] = {
    "lone_surrogate": "\ud800",
    "surrogate_in_text": "echo a\udfffb",
    "nul": "a\x00b",
    "terminal_escapes": "\x1b[2J\u202e\ufeff",
    "variable_of_5000_digits": "#" + "9" * 5_000,
    "number_of_5000_digits": "9" * 5_000,
    "huge": "x" * 200_000,
    "injection": "'; DROP TABLE x; -- $(id) `id` ]]> }}",
    "format_strings": "%s%n%x {0} {}",
    "backslashes": "\\" * 99,
    "unicode": "日本語 🙂 \u0301",
}


@pytest.fixture(scope="module", params=list(ENV_CLASSES))
def env(request: pytest.FixtureRequest) -> Iterator[Any]:
    instance = env_class(request.param)(split="dev", **ENV_KWARGS.get(request.param, {}))
    yield instance
    instance.close()


def _value(schema: dict[str, Any], content: str) -> Any:
    return [content] if schema.get("type") == "array" else content


def _calls(env: Any, content: str) -> Iterator[dict[str, Any]]:
    """One call per tool and argument, that argument holding ``content``."""
    for tool in env.tools:
        properties = tool.parameters.get("properties", {})
        for key in properties:
            arguments = {
                name: _value(schema, content if name == key else "a")
                for name, schema in properties.items()
            }
            yield {"name": tool.name, "arguments": arguments}


def _honest(env: Any, action: Any) -> str:
    status, _ = check_step(env, action)
    assert status != Status.TASK_ERROR.value, (
        f"{env.task_id}: {json.dumps(action)[:200]} ended as task_error: "
        f"{env.unwrapped._transcript[-1][:300]}"
    )
    return status


@pytest.mark.parametrize("content", list(HOSTILE))
def test_hostile_content_in_every_argument_is_never_a_task_error(env: Any, content: str) -> None:
    for action in _calls(env, HOSTILE[content]):
        if env.unwrapped.status is not Status.RUNNING:
            env.reset(seed=0)
        _honest(env, action)


def test_generated_actions_of_every_form_are_never_a_task_error(env: Any) -> None:
    tools = tuple(env.tools)
    examples = 15 if env.task_id in ("os", "alfworld") else 40

    @settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(action=actions_for(tools, huge=50_000))
    def body(action: Any) -> None:
        _honest(env, action)

    body()


# ------------------------------------------------ self-termination, every DB backend

SELF_TERMINATION: dict[str, tuple[tuple[str, ...], float]] = {
    "sqlite": (
        (
            "ATTACH ':memory:' AS other",
            "DETACH main",
            "VACUUM INTO '/tmp/agentgym-self-termination.db'",
            "PRAGMA writable_schema = 1",
            "SELECT load_extension('/lib/x86_64-linux-gnu/libc.so.6')",
            "BEGIN EXCLUSIVE",
            "SELECT CAST(X'FF' AS TEXT) COLLATE MYSQL_CI = 'a'",
        ),
        0.0,
    ),
    "mariadb": (
        (
            "KILL CONNECTION_ID()",
            "KILL USER CURRENT_USER()",
            "KILL QUERY CONNECTION_ID()",
            "SET SESSION wait_timeout = 1",
            "SET SESSION max_statement_time = 0.000001, wait_timeout = 1",
            "SHUTDOWN",
        ),
        1.3,  # past the shortest wait_timeout MariaDB accepts
    ),
    "postgres": (
        (
            "SELECT pg_terminate_backend(pg_backend_pid())",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = current_user",
            "SELECT pg_cancel_backend(pg_backend_pid())",
            "SET idle_session_timeout = 1",
            "SELECT set_config('statement_timeout', '1', false), "
            "set_config('idle_session_timeout', '1', false)",
            "BEGIN",
            "SET SESSION AUTHORIZATION postgres",
        ),
        0.2,
    ),
}
"""Per DB backend: statements that try to end the agent's own session (or the server),
and how long the policy "thinks" afterwards, so that idle timeouts fire."""


@pytest.mark.parametrize(
    "backend",
    [
        "sqlite",
        pytest.param("mariadb", marks=pytest.mark.mariadb),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
)
def test_self_termination_on_every_db_backend_is_never_a_task_error(backend: str) -> None:
    """An episode that ends its own session is an agent abort, not a backend fault."""
    url = {"sqlite": None, "mariadb": MARIADB_URL, "postgres": POSTGRES_URL}[backend]
    env = env_class("db")(split="dev", db_url=url and server_url(url))
    attacks, pause = SELF_TERMINATION[backend]
    try:
        for attack in attacks:
            env.reset(seed=0)
            follow_up = ["SELECT 1", "SELECT 1"]
            status = _honest(env, {"name": "execute_sql", "arguments": {"query": attack}})
            while status == "running" and follow_up:
                time.sleep(pause)
                query = follow_up.pop()
                status = _honest(env, {"name": "execute_sql", "arguments": {"query": query}})
            if "KILL CONNECTION" in attack or "terminate" in attack or "KILL USER" in attack:
                assert status == Status.AGENT_INVALID_ACTION.value, attack
    finally:
        env.close()
