"""``benchmarks/gpu_check.py`` tried on CPU at a small size (``--allow-cpu``): the HF
engine path without SGLang, the log-prob check and the FSDP2 step under torchrun, all
in one call, as the GPU machine will run it. The timings it prints are not checked."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
pytestmark = pytest.mark.train


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=400,
    )  # fmt: skip


def _table(text: str) -> dict[str, str]:
    rows = [line.split("|")[1:3] for line in text.splitlines() if line.startswith("| ")]
    return {key.strip(): value.strip() for key, value in rows}


def test_the_whole_check_runs_on_cpu_with_the_hf_engine(tmp_path: Path) -> None:
    out = tmp_path / "gpu_check.md"
    done = _run(
        "--allow-cpu", "--engine", "hf", "--hidden", "64", "--layers", "2", "--vocab", "300",
        "--batch", "4", "--new-tokens", "8", "--episodes", "4", "--length", "64",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = _table(out.read_text(encoding="utf-8"))
    assert report["engine"] == "hf" and report["gpus"] == "0"
    assert report["fsdp_world"] == "1"
    # The engine samples from a bf16 copy; the trainer recomputes in fp32 and in bf16.
    assert 0 < float(report["logprob_mean_abs_diff_fp32"]) < 0.05
    assert float(report["logprob_mean_abs_diff_bf16"]) < 0.05
    for key in ("engine_tokens_per_s", "fsdp_tokens_per_s", "probe_call_after_update_s"):
        assert float(report[key]) > 0


def _module():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("argv", "message"), [([], "--allow-cpu"), (["--allow-cpu"], "give --out")]
)
def test_a_cpu_trial_never_writes_the_gpu_result(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], message: str
) -> None:
    module = _module()
    monkeypatch.setattr(module.torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(sys, "argv", ["gpu_check.py", *argv])
    with pytest.raises(SystemExit, match=message):
        module.main()


def test_auto_takes_the_hf_engine_where_sglang_is_missing() -> None:
    module = _module()
    expected = "sglang" if importlib.util.find_spec("sglang") else "hf"
    assert module.chosen_engine("auto") == expected
    assert module.chosen_engine("sglang") == "sglang"
