"""Per-step metrics: ``RUN_DIR/metrics.jsonl`` (the diagnostics read it), TensorBoard, and
a rich progress bar with the headline numbers.

One JSON object per RL step, in the layout of INTERFACES.md:
``{"step", "global": {...}, "tasks": {task_id: {...}}}``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become None (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


class MetricsWriter:
    """Appends step records; on resume drops records after the checkpoint's step."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, resume_after: int | None = None):
        self.path = Path(run_dir) / METRICS_FILE
        if resume_after is not None and self.path.exists():
            kept = [
                line
                for line in self.path.read_text(encoding="utf-8").splitlines()
                if line.strip() and json.loads(line)["step"] <= resume_after
            ]
            self.path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        elif resume_after is None and self.path.exists():
            self.path.unlink()
        self._file = self.path.open("a", encoding="utf-8")
        self._tb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:  # tensorboard is optional (the train extra has it)
                self._tb = None
            else:
                self._tb = SummaryWriter(log_dir=str(Path(run_dir) / "tensorboard"))

    def write(self, record: dict[str, Any]) -> None:
        self._file.write(json.dumps(_clean(record), sort_keys=True) + "\n")
        self._file.flush()
        if self._tb is None:
            return
        step = record["step"]
        for key, value in record["global"].items():
            if isinstance(value, (int, float)):
                self._tb.add_scalar(f"global/{key}", value, step)
        for task, values in record["tasks"].items():
            for key, value in values.items():
                if isinstance(value, (int, float)) and value is not None:
                    self._tb.add_scalar(f"{key}/{task}", value, step)

    def close(self) -> None:
        self._file.close()
        if self._tb is not None:
            self._tb.close()
