"""Run the benchmarks: ``python -m benchmarks.run [name ...]`` (all when none is named).

Each ``benchmarks/bench_<name>.py`` has a ``main() -> None`` that measures ours and the
peer side by side in one run and writes ``benchmarks/results/<name>.md``.

The other modules here are not timing benchmarks, and each names its own command:
``base_model`` (a model scored with the evaluation protocol, and paired comparisons),
``real_model`` (the named real LLM's measurements), ``clip_pilot`` (the clip-binding
pilot's table), ``gpu_check`` (the one-script GPU check); ``fuzz_tools``, ``soak``,
``instant_env``, ``machine`` and ``report`` (writing a report without losing its
hand-written part) are what the benchmarks share.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(path.stem.removeprefix("bench_") for path in HERE.glob("bench_*.py"))


def main(argv: list[str]) -> int:
    names = argv or available()
    unknown = sorted(set(names) - set(available()))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {available()}", file=sys.stderr)
        return 2
    for name in names:
        print(f"== {name}", flush=True)
        importlib.import_module(f"benchmarks.bench_{name}").main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
