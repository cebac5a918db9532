"""``verifiers`` 0.4.0 plays the five tasks both ways, its own evaluation against a loopback
model that answers with the expert's calls (:mod:`support.expert_model`):

- natively: the ``agentgym-eppo-verifiers`` taskset, in this process (``run_eval``, what
  ``vf-eval`` runs);
- over ``agentgym-eppo serve``: ``verifiers``' own ``openenv`` taskset, run by
  ``vf-eval``'s entry point from ``eval.toml`` files in a child process that has the
  OpenEnv client ``verifiers`` requires (``openenv`` 0.4.1, which ``make adapter-libs``
  puts in ``.venv/openenv-0.4.1``); the servers are this process's, on ``openenv-core``
  0.3.

Each task scores as the same episode does in-process; replies the env cannot act on get
its abort reward and status; concurrent rollouts and cancelled or timed-out ones leave no
env, sandbox or session behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import httpx
import psutil
import pytest

pytest.importorskip("verifiers", reason="verifiers is not installed: make adapter-libs")
pytest.importorskip("openenv", reason="openenv-core is not installed (the openenv extra)")

import tomli_w
from support.chat_servers import ChatServer, chat_server
from support.expert_model import BAD_REPLIES, ExpertBook, expert_reply
from support.serving_support import thread_server, wait_until
from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.configs.cli.eval import EvalConfig

import agentgym_eppo.adapters.verifiers as adapter
from agentgym_eppo.registration import TASK_IDS, env_id_for
from agentgym_eppo.wrappers.session import EpisodeSession

TASKSET = "agentgym-eppo-verifiers"
OPENENV_CLIENT = Path(sys.prefix) / "openenv-0.4.1"
"""``openenv`` 0.4.1, installed apart (``pip install --target``): in the venv its files
would replace ``openenv-core`` 0.3's, which the servers run on."""
VF_EVAL = "import sys\nfrom verifiers.v1.cli.eval.main import main\nfor path in sys.argv[1:]:\n    main(['@', path, '--no-rich'])\n"
"""``vf-eval @ path`` for each path, in one interpreter (``verifiers`` takes seconds to import)."""
OS_KWARGS = {"prestart": False}


@pytest.fixture(scope="module")
def book() -> ExpertBook:
    book = ExpertBook("dev")
    for task in TASK_IDS:
        book.play(task, 0, **(OS_KWARGS if task == "os" else {}))
    return book


class Stall:
    """Holds every request after a rollout's first turn until released (the model of the
    cancellation and timeout tests)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.waiting = threading.Event()


@pytest.fixture(scope="module")
def stall() -> Iterator[Stall]:
    stall = Stall()
    yield stall
    stall.release.set()


@pytest.fixture(scope="module")
def model(book: ExpertBook, stall: Stall) -> Iterator[ChatServer]:
    expert = expert_reply(book)

    def reply(handler: Any, body: dict[str, Any], number: int) -> None:
        if body.get("model") == "stall" and any(m["role"] == "assistant" for m in body["messages"]):
            stall.waiting.set()
            stall.release.wait(timeout=60)
            body = {**body, "model": "expert"}
        expert(handler, body, number)

    with chat_server(reply) as server:
        yield server


class Counted(EpisodeSession):
    """Counts the envs the native taskset opens, closes, and holds at once."""

    lock = threading.Lock()
    opened = closed = live = peak = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        with self.lock:
            type(self).opened += 1
            type(self).live += 1
            type(self).peak = max(type(self).peak, type(self).live)

    def close(self) -> None:
        super().close()
        with self.lock:
            type(self).closed += 1
            type(self).live -= 1


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[Counted]:
    counter = type("Counter", (Counted,), {})
    monkeypatch.setattr(adapter, "EpisodeSession", counter)
    return counter


def sandboxes() -> list[psutil.Process]:
    """The OS tasks' sandboxes this process started (bubblewrap), still running."""
    return [
        child
        for child in psutil.Process().children(recursive=True)
        if "bwrap" in (child.name() or "")
    ]


def eval_config(server: ChatServer, output: Path, **config: Any) -> EvalConfig:
    """The run of ``config`` (an ``eval.toml``'s keys) against the model ``server``."""
    base = {
        "client": {"base_url": server.url, "api_key_var": "AGENTGYM_NO_KEY"},
        "push": False,
        "rich": None,
        "output_dir": str(output),
    }
    return EvalConfig.model_validate(base | config)


def evaluate(server: ChatServer, output: Path, **config: Any) -> list[Any]:
    """``verifiers``' evaluation (``vf-eval``'s ``run_eval``) of ``config``."""
    return asyncio.run(run_eval(eval_config(server, output, **config)))


def native(tasks: list[str], ids: list[str], **env: Any) -> dict[str, Any]:
    taskset = {"id": TASKSET, "tasks": tasks, "split": "dev"}
    return {"env": {"taskset": taskset, **env}, "select": {"include": {"ids": ids}}}


def in_process(task: str, action: Any) -> tuple[float, str]:
    """What ``action`` as the first turn of the instance earns in-process, and its status."""
    env = gym.make(env_id_for(task), split="dev", **(OS_KWARGS if task == "os" else {}))
    try:
        env.reset(options={"index": 0})
        _, reward, terminated, truncated, info = env.step(action)
        assert terminated or truncated
        return float(reward), str(info["status"])
    finally:
        env.close()


def test_the_native_taskset_scores_each_task_as_in_process(
    model: ChatServer, book: ExpertBook, counted: type[Counted], tmp_path: Path
) -> None:
    first = len(model.requests)
    config = native(list(TASK_IDS), [f"{task}/dev/0" for task in TASK_IDS])
    episodes = evaluate(model, tmp_path, model="expert", **config)
    assert len(episodes) == len(TASK_IDS)
    played = {episode.task: episode for episode in book.episodes.values()}
    for episode in episodes:
        assert episode.ok, episode.errors
        (trace,) = episode.traces
        expected = played[trace.info["agentbench"]["task"]]
        assert trace.rewards["agentbench_reward"].score == expected.reward == 1.0
        assert trace.metrics["success"] == 1.0
        assert trace.metrics["status_completed"] == 1.0
        assert trace.metrics["turns"] == len(expected.calls)
    # the model was told the system prompt and offered the tools; its calls were native
    # tool calls, each observation came back as their tool message
    for request in model.requests[first:]:
        roles = [message["role"] for message in request["messages"]]
        assert request["tools"] and roles[:2] == ["system", "user"]
        assert set(roles[2:]) <= {"assistant", "tool"}
    assert counted.opened == counted.closed == len(TASK_IDS)
    assert wait_until(lambda: not sandboxes(), timeout=10)


def test_loading_the_taskset_starts_no_sandbox_and_gives_each_instance_its_prompt_and_tools() -> (
    None
):
    config = adapter.AgentBenchTasksetConfig(id=TASKSET, tasks=["os"], split="dev")
    tasks = list(adapter.AgentBenchTaskset(config))
    assert not sandboxes()
    env = gym.make(env_id_for("os"), split="dev", **OS_KWARGS)
    try:
        assert len(tasks) == env.unwrapped.num_tasks  # type: ignore[attr-defined]
        assert [task.data.name for task in tasks[:2]] == ["os/dev/0", "os/dev/1"]
        assert tasks[0].data.system_prompt == env.unwrapped.system_prompt  # type: ignore[attr-defined]
        assert tasks[0].data.tools == env.unwrapped.tool_schemas  # type: ignore[attr-defined]
    finally:
        env.close()


@pytest.mark.parametrize("bad", sorted(BAD_REPLIES))
def test_a_reply_the_env_cannot_act_on_gets_its_abort_reward_and_status(
    model: ChatServer, counted: type[Counted], tmp_path: Path, bad: str
) -> None:
    (episode,) = evaluate(model, tmp_path, model=bad, **native(["db"], ["db/dev/0"]))
    (trace,) = episode.traces
    reply = BAD_REPLIES[bad]
    reward, status = in_process("db", reply["call"] if "call" in reply else reply["text"])
    # AgentBench's abort penalty; a call whose arguments are not JSON fails validation
    assert reward == -0.2
    assert status == (
        "agent_validation_failed" if bad == "malformed-json" else "agent_invalid_action"
    )
    assert trace.rewards["agentbench_reward"].score == reward
    assert trace.metrics[f"status_{status}"] == 1.0 and trace.metrics["success"] == 0.0
    assert episode.ok and trace.info["agentbench"]["status"] == status
    assert counted.opened == counted.closed == 1


def test_32_concurrent_rollouts_over_db_and_os_leave_no_env_or_sandbox(
    model: ChatServer, counted: type[Counted], tmp_path: Path
) -> None:
    config = native(["os", "db"], ["os/dev/0", "db/dev/0"], max_envs=16)
    episodes = evaluate(
        model, tmp_path, model="expert", num_rollouts=16, max_concurrent=32, **config
    )
    assert len(episodes) == 32
    assert all(episode.ok for episode in episodes), [e.errors for e in episodes if not e.ok]
    assert {trace.reward for episode in episodes for trace in episode.traces} == {1.0}
    assert counted.opened == counted.closed == 32
    assert 1 < counted.peak <= 16  # played concurrently, never more envs than max_envs
    assert wait_until(lambda: not sandboxes(), timeout=10)


def test_a_rollout_cancelled_or_timed_out_mid_episode_frees_its_env(
    model: ChatServer, stall: Stall, counted: type[Counted], tmp_path: Path
) -> None:
    config = native(["os"], ["os/dev/0"])

    async def cancel_mid_episode() -> None:
        cancelled = eval_config(model, tmp_path / "cancelled", model="stall", **config)
        run = asyncio.ensure_future(run_eval(cancelled))
        while not stall.waiting.is_set():  # the first call ran, the model holds the second
            await asyncio.sleep(0.05)
        assert counted.live == 1 and sandboxes()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(cancel_mid_episode())
    assert counted.opened == counted.closed == 1
    assert wait_until(lambda: not sandboxes(), timeout=10)

    stall.waiting.clear()
    timed = native(["os"], ["os/dev/0"], timeout={"episode": 2.0})
    (episode,) = evaluate(model, tmp_path / "timed-out", model="stall", **timed)
    assert episode.is_timeout and not episode.ok
    assert counted.opened == counted.closed == 2
    assert wait_until(lambda: not sandboxes(), timeout=10)


def test_vf_eval_over_the_servers_scores_each_task_as_in_process(
    model: ChatServer, book: ExpertBook, tmp_path: Path
) -> None:
    if not OPENENV_CLIENT.is_dir():
        pytest.skip(f"no openenv 0.4.1 client at {OPENENV_CLIENT}: make adapter-libs")
    expected: dict[str, float] = {}  # run dir -> the in-process reward
    with contextlib.ExitStack() as stack:
        urls = {task: stack.enter_context(thread_server(task)) for task in TASK_IDS}
        paths = []
        expert_models = ("expert", "expert-json")
        for number, task in enumerate(TASK_IDS):
            (episode,) = (e for e in book.episodes.values() if e.task == task)
            # Hermes blocks and bare JSON calls, alternately
            paths.append(_eval_toml(tmp_path, task, urls[task], model, expert_models[number % 2]))
            expected[task] = episode.reward
        for bad, reply in BAD_REPLIES.items():
            paths.append(_eval_toml(tmp_path, bad, urls["db"], model, bad))
            expected[bad] = in_process("db", reply["text"])[0]
        environment = {**os.environ, "PYTHONPATH": str(OPENENV_CLIENT)}
        done = subprocess.run(
            [sys.executable, "-c", VF_EVAL, *map(str, paths)],
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        for url in urls.values():  # every session closed
            assert httpx.get(f"{url}/sessions", timeout=10).json()["active_sessions"] == 0
    # what the model saw: the reset observation (the task's system prompt and tools in
    # its info) and the action schema, whose one required field is the reply's text
    openings = [_opening(request) for request in model.requests]
    seen = {opening["observation"]["info"]["task_id"]: opening for opening in openings if opening}
    assert sorted(seen) == sorted(TASK_IDS)
    for opening in seen.values():
        info = opening["observation"]["info"]
        assert info["system_prompt"] and info["tools"] and info["split"] == "dev"
        assert opening["action_schema"]["required"] == ["text"]
    for run, reward in expected.items():
        (line,) = (tmp_path / "out" / run / "traces.jsonl").read_text().splitlines()
        trace = json.loads(line)["traces"][0]
        assert trace["ok"], (run, trace["errors"])
        assert trace["rewards"]["openenv_reward"]["score"] == pytest.approx(reward), run
        assert reward == (-0.2 if run in BAD_REPLIES else 1.0)
    assert wait_until(lambda: not sandboxes(), timeout=10)


def _eval_toml(
    directory: Path, run: str, base_url: str, model: ChatServer, model_name: str
) -> Path:
    """docs/verifiers.md's ``eval.toml`` for one server and one model, the player on this
    taskset's in-process harness (the doc's ``null`` harness runs a ``uv`` script, one
    process per turn)."""
    config = {
        "model": model_name,
        "push": False,
        "output_dir": str(directory / "out"),
        "run": {"dir": run},
        "client": {"base_url": model.url, "api_key_var": "AGENTGYM_NO_KEY"},
        "env": {
            "taskset": {
                "id": "openenv",
                "base_url": base_url,
                "resets": [{"split": "dev", "index": 0}],
            },
            "player": {"runtime": {"type": "subprocess"}, "harness": {"id": TASKSET}},
        },
    }
    path = directory / f"{run}.toml"
    path.write_text(tomli_w.dumps(config))
    return path


def _opening(request: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON opening turn ``verifiers``' ``openenv`` taskset sends, if it is one."""
    user = next(message for message in request["messages"] if message["role"] == "user")
    try:
        opening = json.loads(user["content"])
    except (TypeError, ValueError):
        return None
    return opening if isinstance(opening, dict) and "observation" in opening else None
