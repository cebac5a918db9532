"""The five tasks as OpenEnv servers (``agentgym-eppo serve --task ID``).

- :mod:`.types`: OpenEnv's Action, Observation and State for the tasks;
- :mod:`.environment`: one session's environment (OpenEnv's ``Environment``);
- :mod:`.server`: OpenEnv's ``HTTPEnvServer`` with the limits, run by uvicorn;
- :mod:`.sessions`: one pool of session slots for every route, the idle timeout;
- :mod:`.guards`: the token, and what the routes must not receive;
- :mod:`.client`: a typed OpenEnv ``EnvClient``;
- :mod:`.process`: a server in a subprocess (for tests, benchmarks, many servers);
- :mod:`.command`: the command line.

The names below are imported on first use, so that the command line's parser (built
from :mod:`.command`) needs no OpenEnv.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AgentBenchAction": ".types",
    "AgentBenchObservation": ".types",
    "AgentBenchState": ".types",
    "action_class": ".types",
    "AgentBenchEnvironment": ".environment",
    "ServeConfig": ".server",
    "build_app": ".server",
    "serve": ".server",
    "AgentBenchClient": ".client",
    "ServerProcess": ".process",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
