"""The layer contract: every import in the package points down (or sideways in a layer).

``core`` <- ``environments`` (with the registration) <- ``vector``/``wrappers`` <-
``trainer`` <- ``adapters`` (``serving``, the environments over HTTP, sits beside
``vector``); inside the trainer, bottom first: its base helpers <-
``algorithms`` <- ``rollout`` (with the evaluation that plays it) <- the config
sections <- ``training`` (with its checkpoints) <- orchestration (the run, the one RL
step, the launchers, the CLI). ``analysis`` reads only the config: it may import the
config sections and the base helpers of the trainer, nothing else of it.

Every ``import`` counts: at module level, under ``TYPE_CHECKING`` and inside functions,
since each is a dependency a reader must follow. ``make lint`` runs this file.
"""

from __future__ import annotations

import ast
from pathlib import Path

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
    ("rollout", [f"{T}.rollout", f"{T}.evaluation"]),
    ("config", [f"{T}.config", f"{T}.distributed.config"]),
    ("training", [f"{T}.training", f"{T}.checkpoint"]),
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


def test_every_module_of_the_package_has_a_layer():
    for path in PACKAGE.rglob("*.py"):
        layer_of(_module_name(path))
