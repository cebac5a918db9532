"""The training config: every section checks itself when built, every named choice goes
through one kind of registry, and every field says what it does and where its default
comes from (``agentgym-eppo train --show-config`` prints it)."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

pytest.importorskip("torch")

from agentgym_eppo.core.registry import Registry, UnknownNameError
from agentgym_eppo.core.tasks import TASK_SPLITS
from agentgym_eppo.registration import ENVIRONMENTS, TASK_IDS
from agentgym_eppo.trainer.algorithms.advantages import ADVANTAGE_ESTIMATORS
from agentgym_eppo.trainer.algorithms.clip_policies import CLIP_POLICIES, EPPOClip
from agentgym_eppo.trainer.config import (
    PROMPTS,
    ClipConfig,
    EvalConfig,
    RLConfig,
    RolloutConfig,
    TrainConfig,
    config_fields,
)
from agentgym_eppo.trainer.distributed.config import (
    ROLLOUT_ENGINES,
    FSDPConfig,
)
from agentgym_eppo.vector.workers import BACKENDS

PACKAGE = Path(__file__).parents[1] / "agentgym_eppo"

# Where a default can come from: a publication or a reference implementation, or this
# project ("ours": a choice with its reason; "off"/"unset": the feature is not used).
SOURCE = re.compile(
    r"\b(paper|verl|arXiv|AgentBench|AgentRL|DAPO|DCPO|BAPO|EPPO|SGLang|"
    r"Default: (ours|off|unset))"
)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: ClipConfig(policy="dapoo"),
            r"^clip.policy: unknown clip policy 'dapoo' \(did you mean 'dapo'\?\)",
        ),
        (lambda: EPPOClip.Params(alpha=1.5), r"^clip.eppo: alpha must be in \[0, 1\), got 1.5$"),
        (
            lambda: RolloutConfig(backend="subprocesses"),
            r"^rollout.backend: unknown vector back-end 'subprocesses' "
            r"\(did you mean 'subprocess'\?\); known: ray, serial, subprocess$",
        ),
        (
            lambda: RolloutConfig(prompt="compakt"),
            r"^rollout.prompt: unknown prompt style 'compakt' \(did you mean 'compact'\?\)",
        ),
        (
            lambda: EvalConfig(split="devel"),
            r"^eval.split: unknown split 'devel' \(did you mean 'dev'\?\); known: dev, test, train$",
        ),
        (
            lambda: EvalConfig(tasks=["webshopp"]),
            r"^eval.tasks: unknown task 'webshopp' \(did you mean 'webshop'\?\)",
        ),
        (
            lambda: EvalConfig(stages=["before_sft", "after_rl"]),
            r"^eval.stages: 'before_sft' is now called 'base'$",
        ),
        (lambda: RLConfig(steps=-1), r"^rl.steps must be >= 0"),
        (
            lambda: RLConfig(warmup_steps=-1),
            r"^rl.warmup_steps must be >= 0 \(0 = off\), got -1$",
        ),
        (
            lambda: TrainConfig(tasks={"alfwrld": 8}),
            r"^tasks: unknown task 'alfwrld' \(did you mean 'alfworld'\?\)",
        ),
        (
            lambda: TrainConfig(device="gpu"),
            r"^device must be auto or a torch device \(cpu, cuda, cuda:1\), got 'gpu'$",
        ),
        (
            lambda: TrainConfig(tasks={"db": 6}),
            r"^tasks.db = 6 slots must be a positive multiple of rollout.group_size \(8\)$",
        ),
    ],
)
def test_a_config_section_checks_itself_when_built(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_the_defaults_and_gymnasium_ids_build():
    assert TrainConfig().clip.policy == "eppo"
    # an env id (registered when the run starts) is not a task id and is not refused
    assert TrainConfig(tasks={"support.trainer_test_envs:Echo-v0": 8}).tasks


def test_every_named_family_is_a_registry_with_one_closest_match_answer():
    families = [
        CLIP_POLICIES,
        ADVANTAGE_ESTIMATORS,
        BACKENDS,
        PROMPTS,
        ROLLOUT_ENGINES,
        ENVIRONMENTS,
        TASK_SPLITS,
    ]
    assert all(isinstance(family, Registry) for family in families)
    with pytest.raises(UnknownNameError, match=r"did you mean 'sglang'\?"):
        ROLLOUT_ENGINES.lookup("sglan")
    # the closest match is computed in one place in the package
    users = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "get_close_matches":
                users.append(path.relative_to(PACKAGE).as_posix())
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "difflib"
                and any(alias.name == "get_close_matches" for alias in node.names)
            ):
                users.append(path.relative_to(PACKAGE).as_posix())
    assert users == ["core/registry.py"]


def test_the_task_ids_are_written_out_once():
    from agentgym_eppo.environments.fresh import generators
    from agentgym_eppo.trainer.analysis.plots import TASK_ORDER
    from agentgym_eppo.trainer.training.pretrain import TASKS

    assert TASK_IDS == tuple(ENVIRONMENTS) == ("os", "db", "kg", "alfworld", "webshop")
    assert tuple(TrainConfig().tasks) == TASK_ORDER == TASKS == tuple(generators()) == TASK_IDS


def _all_fields():
    rows = config_fields()
    rows += [(f"fsdp.{name}", f, default) for name, f, default in config_fields(FSDPConfig)]
    return rows


def test_every_config_field_has_help_naming_where_its_default_comes_from():
    rows = _all_fields()
    assert len(rows) > 80
    missing = [name for name, f, _ in rows if not f.metadata.get("help", "").strip()]
    assert missing == []
    unsourced = [name for name, f, _ in rows if not SOURCE.search(f.metadata["help"])]
    assert unsourced == []
    for cls in (TrainConfig, FSDPConfig):  # sections too have a line of help
        assert all(f.metadata.get("help") for f in dataclasses.fields(cls))


def test_show_config_prints_every_field_with_its_value_default_and_help(capsys):
    from agentgym_eppo.trainer.cli import main

    assert main(["train", "--defaults", "--show-config", "rl.steps=3"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for name, f, default in config_fields():
        heading = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = "))
        assert lines[heading + 1].strip() == f.metadata["help"]
        if name != "rl.steps":
            assert lines[heading] == f"{name} = {default!r}"
    assert "rl.steps = 3  (default 700)" in lines
    assert "clip.policy = 'eppo'" in lines
