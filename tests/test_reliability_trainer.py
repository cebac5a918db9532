"""The trainer under faults: failed episodes stay out of the loss, and a run
SIGKILLed at random points resumes to the same result as an uninterrupted one.

Resume: the CPU trainer (``agentgym-eppo train``, a separate process) on a tiny config
is killed with SIGKILL up to ten times: every other start at a random moment (seeded),
the others as soon as the run has checkpointed one more RL step, so that kills land
inside the RL stage whatever the machine's speed (asserted: at least one kill between
the first and the last RL step); each restart with ``resume=true`` continues from the
newest complete checkpoint. Checked: every checkpoint the interrupted run wrote holds
the same pacer (EPPO clip policy) state, tracker state, optimizer step and RL step as
the uninterrupted run's checkpoint of that step; the task iterator needs no state of
its own (each step's instances are drawn from a sampler reseeded with ``(seed,
step)``), so its position is the step, and the per-step metrics, which depend on the
instances drawn, match. Tolerance: metrics and
final weights equal to within 1e-6 (absolute), the same process-to-process on one
machine with one torch thread; pacer states exactly equal.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from agentgym_eppo.core import Status  # noqa: E402
from agentgym_eppo.trainer.algorithms.clip_policies import FixedClip  # noqa: E402
from agentgym_eppo.trainer.rollout.chat import Transcript  # noqa: E402
from agentgym_eppo.trainer.rollout.episodes import Episode  # noqa: E402
from agentgym_eppo.trainer.training.models import build_tiny_model, build_tokenizer  # noqa: E402
from agentgym_eppo.trainer.training.update import PolicyUpdater, UpdateSettings  # noqa: E402

pytestmark = pytest.mark.train

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
TOLERANCE = 1e-6
KILLS = 10
RL_STEPS = 6


# ---------------------------------------------------------------------- the loss


def _model(seed: int = 0) -> Any:
    torch.set_num_threads(1)
    tokenizer = build_tokenizer(["Say apple. Call say with the word."] * 20, vocab_size=400)
    return build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=seed)


def _episode(tokens: list[int], reward: float, status: str, group: str = "g") -> Episode:
    mask = [0, 0] + [1] * (len(tokens) - 2)
    return Episode(0, "echo", group, "s", Transcript(tokens, mask), reward=reward, status=status)


def _updated_weights(episodes: list[Episode]) -> dict[str, Any]:
    model = _model()
    updater = PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-2),
        FixedClip(),
        UpdateSettings(kl_coef=0.0, temperature=1.0),
        pad_token_id=0,
    )
    result = updater.step(episodes, torch.Generator().manual_seed(0))
    assert result.tokens == 6, "only the two policy-made episodes carry loss tokens"
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def test_task_error_episodes_are_left_out_of_the_loss() -> None:
    good = _episode([5, 6, 7, 8, 9], 1.0, Status.COMPLETED.value)
    bad = _episode([5, 6, 10, 11, 12], -0.2, Status.AGENT_INVALID_ACTION.value)
    lost = _episode([5, 6, 13, 14, 15, 16], -0.2, Status.TASK_ERROR.value)
    without = _updated_weights([good, bad])
    with_lost = _updated_weights([good, bad, lost])
    assert without.keys() == with_lost.keys()
    assert all(torch.equal(without[name], with_lost[name]) for name in without)


class ScriptedEngine:
    """Plays given assistant turns: round k gives ``rounds[k][j]`` to the j-th running slot."""

    def __init__(self, tokenizer: Any, rounds: list[list[str]]) -> None:
        self.tokenizer, self.rounds = tokenizer, rounds

    def generate(self, contexts: Any, max_new_tokens: Any, temperature: float) -> list[list[int]]:
        texts = self.rounds.pop(0)
        assert len(texts) == len(contexts)
        eos = int(self.tokenizer.eos_token_id)
        return [[*self.tokenizer.encode(text), eos] for text in texts]

    def update_weights(self, model: Any) -> None:
        """Nothing to sync: the turns are scripted."""


def test_a_worker_dying_mid_rollout_ends_only_its_episode_and_the_update_skips_it() -> None:
    from support.vector_test_envs import GUESS

    from agentgym_eppo.trainer.rollout.episodes import RolloutLimits, play_episodes, start_episode
    from agentgym_eppo.vector import MultiTaskVectorEnv

    die = '<tool_call>{"name": "die", "arguments": {"how": "9"}}</tool_call>'
    wait = '<tool_call>{"name": "wait", "arguments": {"seconds": "0"}}</tool_call>'
    say = '<tool_call>{"name": "say", "arguments": {"word": "delta"}}</tool_call>'
    torch.set_num_threads(1)
    tokenizer = build_tokenizer([die, wait, say] * 10, vocab_size=400)
    venv = MultiTaskVectorEnv({GUESS: 2}, group_size=2, split="dev", backend="subprocess")
    try:
        observations, infos = venv.reset(seed=0)
        episodes = [
            start_episode(tokenizer, i, observations[i], {k: v[i] for k, v in infos.items()})
            for i in range(2)
        ]
        engine = ScriptedEngine(tokenizer, [[die, wait], [say]])
        play_episodes(venv, episodes, engine, tokenizer, RolloutLimits(64, 2048, 1.0))
    finally:
        venv.close()
    lost, finished = episodes
    assert (lost.status, lost.reward, lost.info["worker_restarted"]) == ("task_error", -0.2, True)
    assert (finished.status, finished.reward, finished.turns) == ("completed", 1.0, 2)
    model = build_tiny_model(tokenizer, hidden_size=32, layers=1, heads=2, kv_heads=1, seed=0)
    updater = PolicyUpdater(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-2),
        FixedClip(),
        UpdateSettings(kl_coef=0.0, temperature=1.0),
        pad_token_id=int(tokenizer.pad_token_id),
    )
    result = updater.step(episodes, torch.Generator().manual_seed(0))
    assert result.tokens == finished.generated_tokens
    assert result.advantages == [0.0]  # alone in its group once the lost episode is out


# ---------------------------------------------------------------------- resume


def _overrides(run_dir: Path, resume: bool) -> list[str]:
    tasks = "{support.trainer_test_envs:Echo-v0: 4, support.trainer_test_envs:Lookup-v0: 4}"
    return [
        f"output_dir={run_dir}",
        f"tasks={tasks}",
        "seed=3",
        "rollout.group_size=4",
        "rollout.backend=serial",
        "rollout.max_tokens_per_turn=16",
        "rollout.max_context=384",
        "model.vocab_size=400",
        "model.hidden_size=32",
        "model.layers=1",
        "model.heads=2",
        "model.kv_heads=1",
        "sft.episodes_per_task=4",
        "sft.epochs=1",
        "sft.batch_episodes=4",
        f"rl.steps={RL_STEPS}",
        "rl.lr=1e-3",
        "rl.save_every=1",
        f"rl.keep_checkpoints={RL_STEPS}",
        "clip.policy=eppo",
        "eval.stages=[]",
        "progress=false",
        "tensorboard=false",
        "bf16=false",
        "threads=1",
        f"resume={'true' if resume else 'false'}",
    ]


def _train(run_dir: Path, resume: bool) -> subprocess.Popen[bytes]:
    code = "import sys, support.trainer_test_envs; from agentgym_eppo.trainer.cli import main; " + (
        "sys.exit(main(sys.argv[1:]))"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS_DIR), str(REPO_ROOT)]),
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-c", code, "train", "--defaults", *_overrides(run_dir, resume)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _finish(process: subprocess.Popen[bytes]) -> None:
    _, errors = process.communicate(timeout=300)
    assert process.returncode == 0, errors.decode(errors="replace")[-3000:]


def _latest_step(run_dir: Path) -> int:
    marker = run_dir / "checkpoints" / "latest"
    if not marker.exists():
        return 0
    directory = run_dir / "checkpoints" / marker.read_text().strip()
    state = torch.load(directory / "trainer_state.pt", weights_only=True)
    return int(state["step"])


def _states(run_dir: Path) -> dict[int, dict[str, Any]]:
    states = {}
    for directory in sorted((run_dir / "checkpoints").glob("step_*")):
        state = torch.load(directory / "trainer_state.pt", weights_only=True)
        states[int(state["step"])] = state
    return states


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    records = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        record["global"] = {k: v for k, v in record["global"].items() if "seconds" not in k}
        records.append(record)
    return records


def _assert_close(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _assert_close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, abs=TOLERANCE, nan_ok=True), where
    else:
        assert a == b, where


def _kill(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _kill_after_step(process: subprocess.Popen[bytes], run_dir: Path, step: int) -> bool:
    """SIGKILL ``process`` as soon as ``run_dir`` holds the checkpoint of RL ``step``
    (polled, up to a deadline); False when the process ended first."""
    deadline = time.monotonic() + 600
    while process.poll() is None and time.monotonic() < deadline:
        if _latest_step(run_dir) >= step:
            _kill(process)
            return True
        time.sleep(0.1)
    assert process.poll() is not None, f"no checkpoint of step {step} within 600 s"
    return False


@pytest.mark.slow
def test_a_run_sigkilled_ten_times_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    started = time.monotonic()
    _finish(_train(straight, resume=False))
    full_run_s = time.monotonic() - started

    interrupted = tmp_path / "interrupted"
    rng = random.Random(10)
    resumed_from: list[int] = []
    killed_after: list[int] = []  # the newest complete RL step when each kill landed
    for attempt in range(KILLS):
        resumed_from.append(_latest_step(interrupted))
        process = _train(interrupted, resume=True)
        if attempt % 2 and resumed_from[-1] + 1 < RL_STEPS:
            # one more RL step done and the next one running: the kill lands mid-RL
            killed = _kill_after_step(process, interrupted, resumed_from[-1] + 1)
        else:
            try:
                process.wait(timeout=rng.uniform(0.2, 0.5) * full_run_s)
                killed = False
            except subprocess.TimeoutExpired:
                _kill(process)
                killed = True
        if killed:
            killed_after.append(_latest_step(interrupted))
        if _latest_step(interrupted) == RL_STEPS:
            break
    if _latest_step(interrupted) < RL_STEPS or not (interrupted / "metrics.jsonl").exists():
        _finish(_train(interrupted, resume=True))
    assert len(resumed_from) >= 3 and resumed_from == sorted(resumed_from)
    assert any(1 <= step < RL_STEPS for step in killed_after), (
        f"no kill landed inside the RL stage (newest step at each kill: {killed_after})"
    )

    ours, theirs = _states(interrupted), _states(straight)
    assert sorted(ours) == sorted(theirs) == list(range(1, RL_STEPS + 1))
    for step, state in ours.items():
        assert state["clip"] == theirs[step]["clip"], f"pacer state after step {step}"
        assert state["tracker"] == theirs[step]["tracker"], f"tracker after step {step}"
        assert (
            state["optimizer"]["state"][0]["step"] == theirs[step]["optimizer"]["state"][0]["step"]
        )
    records = _metrics(interrupted)
    assert [r["step"] for r in records] == list(range(1, RL_STEPS + 1))
    for mine, reference in zip(records, _metrics(straight), strict=True):
        _assert_close(mine, reference, f"step {mine['step']}")
    from safetensors.torch import load_file

    final = f"checkpoints/step_{RL_STEPS}/model.safetensors"
    a, b = load_file(str(interrupted / final)), load_file(str(straight / final))
    assert all(torch.allclose(a[k], b[k], atol=TOLERANCE, rtol=0) for k in a)
