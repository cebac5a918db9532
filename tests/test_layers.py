"""The layer contract: every import in the package points down (or sideways in a layer).

``core`` <- ``environments`` (with the registration) <- ``vector``/``wrappers`` <-
``trainer`` <- ``adapters`` (``serving``, the environments over HTTP, sits beside
``vector``); inside the trainer, bottom first: its base helpers <- ``algorithms`` <-
``rollout/`` (with the evaluation that plays it) <- the config sections (``config/``)
<- ``training/`` (with its checkpoints) <- orchestration (the run, the one RL step, the
launchers, the CLI). Every layer between the base helpers and orchestration is a
folder: a module at the trainer's top level is one or the other. ``analysis`` reads
only the config: it may import the config sections and the base helpers of the
trainer, nothing else of it.

Every ``import`` counts: at module level, under ``TYPE_CHECKING`` and inside functions,
since each is a dependency a reader must follow. ``make lint`` runs this file.

Each choice has one home: the tasks are written out once, in their registration
(``agentgym_eppo/registration.py``), and the ``clip`` config section holds only what the
registered clip policies declare on their classes, which no other class restates.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Collection
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "agentgym_eppo"

T = "agentgym_eppo.trainer"
LAYERS: list[tuple[str, list[str]]] = [  # bottom first
    ("core", ["agentgym_eppo.core"]),
    ("environments", ["agentgym_eppo", "agentgym_eppo.registration", "agentgym_eppo.environments"]),
    (
        "vector/wrappers/serving",
        ["agentgym_eppo.vector", "agentgym_eppo.wrappers", "agentgym_eppo.serving"],
    ),
    ("trainer base", [f"{T}.config_fields", f"{T}.devices", f"{T}.progress"]),
    ("algorithms", [f"{T}.algorithms"]),
    ("rollout", [f"{T}.rollout"]),
    ("config", [f"{T}.config", f"{T}.distributed.config"]),
    ("training", [f"{T}.training"]),
    ("analysis", [f"{T}.analysis"]),
    ("orchestration", [T]),
    ("adapters", ["agentgym_eppo.adapters"]),
]
ANALYSIS_READS = ("trainer base", "config", "analysis")
"""What ``analysis`` may import of the trainer."""


def _module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module``: its longest listed prefix (the bare
    package name matches only itself)."""
    best, best_length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            covers = module == prefix or (
                prefix != "agentgym_eppo" and module.startswith(prefix + ".")
            )
            if covers and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    if best < 0:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return best


def imports_of(path: Path, known: set[str], root: Path = PACKAGE) -> list[tuple[int, str]]:
    """``(line, module)`` of every package import in the file, wherever it sits."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                name = f"{target}.{alias.name}"
                found.append((node.lineno, name if name in known else target))
    return [(line, name) for line, name in found if name.split(".")[0] == "agentgym_eppo"]


def violations() -> list[str]:
    files = sorted(PACKAGE.rglob("*.py"))
    known = {_module_name(path) for path in files}
    analysis = layer_of(f"{T}.analysis")
    analysis_reads = {i for i, (name, _) in enumerate(LAYERS) if name in ANALYSIS_READS}
    problems = []
    for path in files:
        source = _module_name(path)
        here = layer_of(source)
        for line, target in imports_of(path, known):
            there = layer_of(target)
            upward = there > here
            if here == analysis and target.startswith(T) and there not in analysis_reads:
                upward = True
            if upward:
                problems.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line}: {source} ({LAYERS[here][0]}) "
                    f"imports {target} ({LAYERS[there][0]})"
                )
    return problems


def test_every_import_points_down_the_layers():
    assert violations() == []


def test_the_contract_sees_imports_under_type_checking_and_in_functions(tmp_path):
    # the check reads the code, not what an import at run time happens to load
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from agentgym_eppo.trainer.training.update import UpdateResult\n"
        "def f():\n"
        "    from ..rollout import episodes\n"
    )
    fake = tmp_path / "agentgym_eppo" / "trainer" / "analysis" / "run_dir.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(source)
    known = {"agentgym_eppo.trainer.rollout.episodes"}
    found = imports_of(fake, known, root=tmp_path / "agentgym_eppo")
    assert found == [
        (3, "agentgym_eppo.trainer.training.update"),
        (5, "agentgym_eppo.trainer.rollout.episodes"),
    ]
    assert {layer_of(name) for _, name in found} == {
        layer_of(f"{T}.training"),
        layer_of(f"{T}.rollout"),
    }


def test_a_module_at_the_trainers_top_level_is_a_base_helper_or_orchestration():
    # the layers between them are folders (the evaluation lives in rollout/, the
    # checkpoints in training/, the config sections in config/), so none of them can
    # import a module that sits beside the run
    base, orchestration = layer_of(f"{T}.devices"), layer_of(T)
    top = [_module_name(path) for path in sorted((PACKAGE / "trainer").glob("*.py"))]
    assert [name for name in top if layer_of(name) not in (base, orchestration)] == []


def test_every_module_of_the_package_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        layer_of(_module_name(path))


REGISTRATION = PACKAGE / "registration.py"


def _prose(text: str) -> str:
    """``text`` without its doctest examples (a ``>>>`` line up to the next blank line):
    an example's output may list what the registry holds."""
    kept, example = [], False
    for line in text.splitlines():
        example = line.lstrip().startswith(">>>") or (example and bool(line.strip()))
        if not example:
            kept.append(line)
    return "\n".join(kept)


def task_lists(task_ids: Collection[str], root: Path = PACKAGE) -> list[str]:
    """Every place outside the registration that writes the tasks out by name: a list,
    tuple, set or dict display with two task ids or more (as strings or keys), or a
    text (a docstring, a help string; its doctest examples aside) naming every task."""
    word = re.compile(r"\b(" + "|".join(map(re.escape, task_ids)) + r")\b", re.IGNORECASE)
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / REGISTRATION.name:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                named = {i.value for i in items if isinstance(i, ast.Constant)} & set(task_ids)
                listed = len(named) >= 2
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                named_in_text = {m.lower() for m in word.findall(_prose(node.value))}
                listed = named_in_text >= set(task_ids)
            else:
                continue
            if listed:
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}")
    return found


def test_no_module_but_the_registration_lists_the_tasks():
    from agentgym_eppo.registration import TASK_IDS

    assert task_lists(TASK_IDS) == []


def test_the_task_check_sees_displays_keys_and_prose(tmp_path):
    fake = tmp_path / "agentgym_eppo" / "plots.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(
        '"""Tasks: OS, DB and KG."""\n'
        'ORDER = ("os", "kg")\n'
        'ANSWERS = {"db": 1, "kg": 2}\n'
        'ONE = ["os"]\n'
        'USAGE = "eval --tasks db kg"\n'
        "def f():\n"
        '    """>>> f()\n'
        "    known: db, kg, os\n"
        "\n"
        "    Then the tasks.\n"
        '    """\n'
    )
    found = task_lists(("os", "db", "kg"), root=tmp_path / "agentgym_eppo")
    assert found == [
        "agentgym_eppo/plots.py:1",
        "agentgym_eppo/plots.py:2",
        "agentgym_eppo/plots.py:3",
    ]


def _class_annotations(root: Path = PACKAGE) -> list[tuple[str, str, set[str]]]:
    """``(file, qualified class name, annotated names)`` of every class of the package."""
    rows = []

    def visit(node: ast.AST, prefix: str, path: Path) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                annotated = {
                    item.target.id
                    for item in child.body
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                }
                rows.append((path.relative_to(root.parent).as_posix(), name, annotated))
                visit(child, f"{name}.", path)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, f"{prefix}{child.name}.<locals>.", path)

    for path in sorted(root.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8")), "", path)
    return rows


def test_the_clip_section_holds_what_the_registered_policies_declare_and_nothing_restates_it():
    pytest.importorskip("torch")
    from agentgym_eppo.trainer.algorithms.clip_policies import (
        CLIP_POLICIES,
        COMMON_KEYS,
        section_fields,
    )
    from agentgym_eppo.trainer.config import ClipConfig

    declared = [
        key for name, policy in CLIP_POLICIES.items() for key, _, _ in section_fields(name, policy)
    ]
    assert [f.name for f in dataclasses.fields(ClipConfig)] == [*COMMON_KEYS, *declared]
    # A class that annotates the clip section's keys, or every field of a policy's
    # settings, restates them (as the ClipSection protocol did): only the policies'
    # Params and the section itself may.
    params = {policy.Params for policy in CLIP_POLICIES.values()}
    owners = {(c.__module__, c.__qualname__) for p in params for c in p.__mro__} | {
        (ClipConfig.__module__, ClipConfig.__qualname__)
    }
    restating = []
    for file, name, annotated in _class_annotations():
        module = file.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        if (module, name) in owners:
            continue
        keys = annotated & set(declared)
        settings = [p for p in params if len(dataclasses.fields(p)) >= 2]
        if len(keys) >= 2 or any(
            {f.name for f in dataclasses.fields(p)} <= annotated for p in settings
        ):
            restating.append(f"{file}: {name}")
    assert restating == []
