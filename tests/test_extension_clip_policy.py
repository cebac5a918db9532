"""A clip policy added from outside the package: one class, one registration, and the
config, a training run and a comparison select it by name (no file of the package edited).

``TightClip`` below is the example of ``docs/trainer.md`` ("Add a clip policy").
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_trainer_training import _config  # noqa: E402

from agentgym_eppo.trainer.algorithms import (  # noqa: E402
    CLIP_POLICIES,
    ClipPolicy,
    ClipTokens,
    register_clip_policy,
)
from agentgym_eppo.trainer.config import describe_config, dump_config, load_config  # noqa: E402
from agentgym_eppo.trainer.config_fields import help_field  # noqa: E402


class TightClip(ClipPolicy):
    """A symmetric range that narrows step by step: eps, eps * decay, eps * decay^2..."""

    @dataclass
    class Params:
        eps: float = help_field("Range at the first step. Default: ours.", 0.2)
        decay: float = help_field("Factor applied to the range each step. Default: ours.", 0.9)

    def __init__(self, eps: float, decay: float) -> None:
        if not 0 < eps < 1 or not 0 < decay <= 1:
            raise ValueError(f"need 0 < eps < 1 and 0 < decay <= 1, got {eps}, {decay}")
        self.eps, self.decay, self.steps = eps, decay, 0

    def begin_step(
        self, entropy: Mapping[str, float], tokens: Mapping[str, int]
    ) -> dict[str, float]:
        self.current = self.eps * self.decay**self.steps
        self.steps += 1
        return dict.fromkeys(entropy, self.current)

    def bounds(self, batch: ClipTokens) -> tuple[torch.Tensor, torch.Tensor]:
        lower = torch.full_like(batch.ratio, 1 - self.current)
        return lower, torch.full_like(batch.ratio, 1 + self.current)

    def state_dict(self) -> dict[str, object]:
        return {"steps": self.steps}

    def load_state_dict(self, state: Mapping[str, object]) -> None:
        self.steps = int(state["steps"])  # type: ignore[call-overload]


@pytest.fixture(scope="module")
def tight() -> Iterator[type[TightClip]]:
    """``TightClip`` registered as ``tight`` while this module's tests run (registered at
    import, it would show in every other test's list of policies)."""
    register_clip_policy("tight", TightClip)
    yield TightClip
    CLIP_POLICIES.unregister("tight")


@pytest.fixture(scope="module")
def trained(tight, tmp_path_factory) -> Path:
    """One SFT and one RL step of the trainer's test tasks under ``clip.policy: tight``,
    counting the micro-batches whose bounds the policy gave."""
    calls = []
    original = TightClip.bounds

    def counted(self, batch):
        calls.append(len(batch.ratio))
        return original(self, batch)

    from agentgym_eppo.trainer.run import run_training

    run = tmp_path_factory.mktemp("tight")
    config = _config(
        run, "clip.policy=tight", "clip.tight.eps=0.1", "rl.steps=1", "eval.stages=[after_rl]"
    )
    TightClip.bounds = counted  # type: ignore[method-assign]
    try:
        run_training(config)
    finally:
        TightClip.bounds = original  # type: ignore[method-assign]
    assert calls and sum(calls) > 0
    return run


def test_a_registered_policy_is_configured_by_name_in_a_yaml_config(tight, tmp_path):
    path = tmp_path / "tight.yaml"
    path.write_text(yaml.safe_dump({"clip": {"policy": "tight", "tight": {"decay": 0.5}}}))
    config = load_config(path)
    policy = config.clip.build()
    assert isinstance(policy, TightClip) and (policy.eps, policy.decay) == (0.2, 0.5)
    assert policy.begin_step({"os": 1.0}, {"os": 3}) == {"os": 0.2}
    assert policy.begin_step({"os": 1.0}, {"os": 3}) == {"os": 0.1}
    text = describe_config(config)
    assert "clip.tight.decay = 0.5  (default 0.9)" in text
    assert "fixed | eppo | dapo | dcpo | bapo | tight" in text  # clip.policy's help
    dump_config(config, tmp_path / "dumped.yaml")
    assert yaml.safe_load((tmp_path / "dumped.yaml").read_text())["clip"]["tight"] == {
        "eps": 0.2,
        "decay": 0.5,
    }


def test_a_registered_policy_refuses_its_bad_settings_when_the_config_is_built(tight):
    with pytest.raises(ValueError, match=r"^clip.policy=tight: need 0 < eps < 1 and 0 < decay"):
        load_config(None, ["clip.policy=tight", "clip.tight.eps=1.5"])
    with pytest.raises(ValueError, match=r"unknown config key clip.tight.decy \(did you mean"):
        load_config(None, ["clip.policy=tight", "clip.tight.decy=0.5"])


def test_a_registered_name_is_taken_and_a_policy_without_help_is_refused(tight):
    with pytest.raises(ValueError, match="clip policy 'tight' is already registered"):
        register_clip_policy("tight", TightClip)

    class Bare(TightClip):
        @dataclass
        class Params:
            eps: float = 0.2

    with pytest.raises(ValueError, match=r"Params fields \['eps'\] have no help"):
        register_clip_policy("bare", Bare)

    class Clashing(TightClip):
        config_prefix = ""  # flat keys: clip.eps is the fixed policy's

    with pytest.raises(ValueError, match=r"config key clip\.eps is already declared by policy"):
        register_clip_policy("clashing", Clashing)
    assert "bare" not in CLIP_POLICIES and "clashing" not in CLIP_POLICIES


def test_a_registered_policy_trains_a_step_selected_by_name(trained):
    records = [json.loads(line) for line in (trained / "metrics.jsonl").read_text().splitlines()]
    assert [record["step"] for record in records] == [1]
    assert {task["clip_eps"] for task in records[0]["tasks"].values()} == {0.1}
    dumped = yaml.safe_load((trained / "config.yaml").read_text())
    assert dumped["clip"]["policy"] == "tight"
    assert dumped["clip"]["tight"] == {"eps": 0.1, "decay": 0.9}


def test_a_comparison_method_selects_a_registered_policy(trained, tmp_path):
    from agentgym_eppo.trainer.compare import load_compare_config, run_one

    base = tmp_path / "base.yaml"
    dump_config(load_config(trained / "config.yaml", ["rl.steps=1"]), base)
    path = tmp_path / "compare.yaml"
    methods = {"tight": {"clip.policy": "tight", "clip.tight.eps": 0.05}}
    raw = {"output_dir": str(tmp_path / "out"), "base_config": str(base), "seeds": [0]}
    path.write_text(yaml.safe_dump({**raw, "methods": methods}))
    config = load_compare_config(path)
    run = run_one(config, "tight", 0, trained / "checkpoints" / "sft")
    record = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert {task["clip_eps"] for task in record["tasks"].values()} == {0.05}


def test_imports_registers_a_policy_before_the_config_is_read(tmp_path, monkeypatch):
    """``imports`` loads the module that registers a policy, so the CLI, a comparison's
    worker processes and a YAML file can name it with no code of their own."""
    module = "user_clip_policies"
    (tmp_path / f"{module}.py").write_text(
        "from test_extension_clip_policy import TightClip\n"
        "from agentgym_eppo.trainer.algorithms import register_clip_policy\n"
        "register_clip_policy('tight_imported', TightClip)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        config = load_config(
            None,
            [f"imports=[{module}]", "clip.policy=tight_imported", "clip.tight_imported.eps=0.3"],
        )
        assert isinstance(config.clip.build(), TightClip)
        assert config.clip.params().eps == 0.3
    finally:
        CLIP_POLICIES.unregister("tight_imported")
        sys.modules.pop(module, None)
