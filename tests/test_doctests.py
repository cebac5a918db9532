"""Every docstring example in the package and the benchmarks runs (``python -m doctest``
on each module).

The suite's ``testpaths`` is ``tests/``, so ``--doctest-modules`` alone would not reach
them; this test collects the modules itself, one test per module that has
examples, so a failing example names its module.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import agentgym_eppo
import benchmarks

OPTIONAL = {"sglang", "docker", "alfworld", "ray", "trl", "verl", "skyrl_gym", "openrlhf"}
"""Extras a module may need; a module whose import misses one is skipped, not failed."""


def _modules() -> list[str]:
    names = [
        info.name
        for package in (agentgym_eppo, benchmarks)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
    ]
    return sorted(names)


def _examples(module: object) -> list[doctest.DocTest]:
    return [test for test in doctest.DocTestFinder().find(module) if test.examples]


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] in OPTIONAL:
            pytest.skip(f"{name} needs the optional {error.name}")
        raise
    tests = _examples(module)
    if not tests:
        return
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_the_examples_cover_the_main_entry_points() -> None:
    """The base env, the vector env and the pacer each show how they are used."""
    from agentgym_eppo.core import base_env
    from agentgym_eppo.trainer.algorithms import pacer
    from agentgym_eppo.vector import env

    for module, owner in (
        (base_env, "AgentBenchEnv"),
        (env, "MultiTaskVectorEnv"),
        (pacer, "EPPOPacer"),
    ):
        names = {test.name.rsplit(".", 1)[-1] for test in _examples(module)}
        assert owner in names, f"{module.__name__}.{owner} has no example"
