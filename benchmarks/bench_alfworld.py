"""ALFWorld: our environment vs alfworld's stock ``AlfredTWEnv`` on the same shipped games.

Measures, in one run: resets per second (a game not seen before, and the same game
again), steps per second (random admissible commands), and resident memory over 500
of our episodes. The stock side is ``AlfredTWEnv.init_env(batch_size=1)`` as AgentBench
builds it (TextWorld's gym wrapper; with ``batch_size=1`` the game runs in-process),
over the same dev games written out in ALFWorld's layout; its memory is measured in a
fresh process of its own.

Writes ``benchmarks/results/alfworld.md``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import random
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import psutil

from agentgym_eppo.environments.alfworld.env import ALFWorldEnv
from agentgym_eppo.environments.alfworld.games import game_data
from agentgym_eppo.environments.alfworld.tasks import load_task_set
from benchmarks.report import write_generated

RESULTS = Path(__file__).resolve().parent / "results" / "alfworld.md"
GAMES = 6
STEPS = 60
RSS_EPISODES = 500
STOCK_RSS_EPISODES = 20


def _rss_mb(process: psutil.Process) -> float:
    return process.memory_info().rss / 2**20


def _rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


def _act(command: str) -> dict[str, Any]:
    return {"name": "take_action", "arguments": {"action": command}}


def bench_ours(rng: random.Random) -> dict[str, float]:
    env = ALFWorldEnv(split="dev", max_turns=10_000)
    started = time.perf_counter()
    for index in range(GAMES):
        env.reset(options={"index": index})
    cold = time.perf_counter() - started
    warm_times = []
    for index in range(GAMES):
        env.reset(options={"index": index})
        began = time.perf_counter()
        env.reset(options={"index": index})
        warm_times.append(time.perf_counter() - began)
    env.reset(options={"index": 0})
    step_times = []
    for _ in range(STEPS):
        command = rng.choice(env.admissible_commands)
        began = time.perf_counter()
        env.step(_act(command))
        step_times.append(time.perf_counter() - began)
    env.close()
    return {
        "cold_reset_s": cold / GAMES,
        "warm_reset_s": statistics.median(warm_times),
        "step_s": statistics.median(step_times),
    }


def rss_ours(rng: random.Random) -> list[tuple[int, float]]:
    """RSS after 60 and each 100 of 500 episodes (reset + 1 random command), cycling the dev set."""
    env = ALFWorldEnv(split="dev", max_turns=10_000)
    me = psutil.Process()
    samples = [(0, _rss_mb(me))]
    for episode in range(1, RSS_EPISODES + 1):
        env.reset(options={"index": episode % env.num_tasks})
        env.step(_act(rng.choice(env.admissible_commands)))
        if episode % 100 == 0 or episode == 60:
            samples.append((episode, _rss_mb(me)))
    env.close()
    return samples


def _write_alfworld_layout(root: Path) -> list[str]:
    files = []
    for record in list(load_task_set(None, "dev"))[:GAMES]:
        folder = (
            root
            / "json_2.1.1"
            / "valid_unseen"
            / f"{record.task_type}-{record.sample_id}"
            / "trial"
        )
        folder.mkdir(parents=True)
        (folder / "game.tw-pddl").write_text(json.dumps(game_data(record.row)))
        traj = {"task_type": record.task_type, "pddl_params": dict(record.pddl_params)}
        (folder / "traj_data.json").write_text(json.dumps(traj))
        files.append(str(folder / "game.tw-pddl"))
    return files


def _stock_env(root: Path) -> Any:
    """``AlfredTWEnv(...).init_env(batch_size=1)`` as AgentBench builds it (in-process)."""
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    config = {
        "env": {
            "goal_desc_human_anns_prob": 0.0,
            "task_types": [1, 2, 3, 4, 5, 6],
            "domain_randomization": False,
            "expert_type": "handcoded",
        },
        "dataset": {
            "data_path": str(root / "json_2.1.1" / "train"),
            "eval_id_data_path": str(root / "json_2.1.1" / "valid_seen"),
            "eval_ood_data_path": str(root / "json_2.1.1" / "valid_unseen"),
            "num_train_games": -1,
            "num_eval_games": -1,
        },
        "general": {"training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": 10_000}},
    }
    alfred = AlfredTWEnv(config, train_eval="eval_out_of_distribution")
    alfred.game_files = sorted(alfred.game_files)
    return alfred.init_env(batch_size=1)


def bench_stock(rng: random.Random, root: Path) -> dict[str, float]:
    env = _stock_env(root)
    started = time.perf_counter()
    for _ in range(GAMES):
        _, infos = env.reset()
    reset_s = (time.perf_counter() - started) / GAMES
    step_times = []
    for _ in range(STEPS):
        command = rng.choice(infos["admissible_commands"][0])
        began = time.perf_counter()
        _, _, _, infos = env.step([command])
        step_times.append(time.perf_counter() - began)
    env.close()
    return {"reset_s": reset_s, "step_s": statistics.median(step_times)}


def _stock_rss(root: str, results: Any) -> None:
    """In a fresh process: RSS over STOCK_RSS_EPISODES stock episodes (reset + 1 command)."""
    rng = random.Random(0)
    env = _stock_env(Path(root))
    me = psutil.Process()
    samples = [(0, _rss_mb(me))]
    for episode in range(1, STOCK_RSS_EPISODES + 1):
        _, infos = env.reset()
        env.step([rng.choice(infos["admissible_commands"][0])])
        if episode % 10 == 0:
            samples.append((episode, _rss_mb(me)))
    env.close()
    results.put(samples)


def rss_stock(root: Path) -> list[tuple[int, float]]:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    worker = context.Process(target=_stock_rss, args=(str(root), results))
    worker.start()
    samples: list[tuple[int, float]] = results.get()
    worker.join()
    return samples


def main() -> None:
    rng = random.Random(0)
    ours = bench_ours(rng)
    rss = rss_ours(rng)
    with tempfile.TemporaryDirectory() as tmp:
        _write_alfworld_layout(Path(tmp))
        stock = bench_stock(random.Random(0), Path(tmp))
        stock_rss = rss_stock(Path(tmp))
    lines = [
        "# ALFWorld: agentgym-eppo vs stock AlfredTWEnv",
        "",
        f"Run {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}), a machine shared with other jobs: "
        "the ratios are more telling than the absolute numbers.",
        f"Games: the first {GAMES} shipped dev games (20-40 receptacles each); {STEPS} steps of "
        "random admissible commands; medians except the cold reset (mean over the games).",
        "",
        "| measure | ours | stock AlfredTWEnv | ratio |",
        "|---|---|---|---|",
        f"| reset, new game (resets/s) | {1 / ours['cold_reset_s']:.2f} | "
        f"{1 / stock['reset_s']:.2f} | {stock['reset_s'] / ours['cold_reset_s']:.1f}x |",
        f"| reset, same game again (resets/s) | {1 / ours['warm_reset_s']:.1f} | "
        f"{1 / stock['reset_s']:.2f} (reloads) | {stock['reset_s'] / ours['warm_reset_s']:.1f}x |",
        f"| step (steps/s) | {1 / ours['step_s']:.1f} | {1 / stock['step_s']:.1f} | "
        f"{stock['step_s'] / ours['step_s']:.1f}x |",
        "",
        f"Resident memory of our process over {RSS_EPISODES} episodes (reset + 1 command, "
        "cycling the 60 dev games; the engine caches at most 64 games):",
        "",
        "| episodes | " + " | ".join(str(e) for e, _ in rss) + " |",
        "|---" * (len(rss) + 1) + "|",
        "| RSS (MiB) | " + " | ".join(f"{m:.0f}" for _, m in rss) + " |",
        "",
        f"Stock AlfredTWEnv (in-process with batch_size=1), in a fresh process, over "
        f"{STOCK_RSS_EPISODES} episodes (fewer: each reset costs it a full game load):",
        "",
        "| episodes | " + " | ".join(str(e) for e, _ in stock_rss) + " |",
        "|---" * (len(stock_rss) + 1) + "|",
        "| RSS (MiB) | " + " | ".join(f"{m:.0f}" for _, m in stock_rss) + " |",
        "",
    ]
    write_generated(RESULTS, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
