"""The trainer's rooms: the algorithm imports with torch alone, public names resolve,
and the registries answer an unknown name with the known ones."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from agentgym_eppo.core.registry import UnknownNameError  # noqa: E402
from agentgym_eppo.trainer.algorithms.advantages import ADVANTAGE_ESTIMATORS  # noqa: E402
from agentgym_eppo.trainer.algorithms.clip_policies import (  # noqa: E402
    CLIP_POLICIES,
    make_clip_policy,
)

HEAVY = ("transformers", "ray", "sglang", "matplotlib", "rich")


def test_importing_the_algorithms_loads_no_transformers_ray_or_sglang():
    code = (
        "import json, sys\n"
        "import agentgym_eppo.trainer.algorithms\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []


@pytest.mark.parametrize(
    "name",
    [
        "EPPOPacer",
        "FixedClip",
        "EPPOClip",
        "TrainConfig",
        "load_config",
        "run_training",
        "evaluate_policy",
        "evaluate_endpoint",
        "diagnose_run",
        "run_compare",
    ],
)
def test_public_names_import_from_the_trainer_package(name):
    pytest.importorskip("transformers")
    import agentgym_eppo.trainer as trainer

    assert callable(getattr(trainer, name))


def test_an_unknown_public_name_is_an_attribute_error():
    import agentgym_eppo.trainer as trainer

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        trainer.nope  # noqa: B018


def test_registries_name_every_estimator_and_policy():
    assert sorted(ADVANTAGE_ESTIMATORS) == ["grpo", "rloo"]
    assert sorted(CLIP_POLICIES) == ["bapo", "dapo", "dcpo", "eppo", "fixed"]


def test_an_unknown_clip_policy_is_one_line_with_the_known_names_and_a_suggestion():
    with pytest.raises(UnknownNameError) as error:
        make_clip_policy("dapoo")
    message = str(error.value)
    assert "\n" not in message
    assert message == (
        "clip.policy: unknown clip policy 'dapoo' (did you mean 'dapo'?); "
        "known: bapo, dapo, dcpo, eppo, fixed"
    )


def test_an_unknown_advantage_estimator_is_refused_not_silently_rloo():
    pytest.importorskip("transformers")
    from agentgym_eppo.trainer.training.update import UpdateSettings

    with pytest.raises(
        UnknownNameError, match=r"unknown advantage estimator 'gae'; known: grpo, rloo"
    ):
        UpdateSettings(advantage="gae")


def test_a_bf16_setting_other_than_auto_true_false_is_refused_when_loaded():
    from agentgym_eppo.trainer.config import load_config

    with pytest.raises(ValueError, match="bf16 must be auto, true or false, got 'maybe'"):
        load_config(None, ["bf16=maybe"])
