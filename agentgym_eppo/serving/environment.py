"""One OpenEnv session's environment: a Gymnasium AgentBench env behind OpenEnv's
``Environment`` interface.

OpenEnv's server builds one :class:`AgentBenchEnvironment` per WebSocket session (and a
throw-away one per stateless HTTP call) and calls ``reset``, ``step``, ``state`` and
``close`` on it from the session's own thread. The Gymnasium env inside is built at the
first ``reset``, so a session that never plays costs nothing, and it is closed (its
sandbox, database, store or game freed) by ``close``, which OpenEnv calls when the
client closes, disconnects or is killed, or the session idles past the timeout. A reset
frees the previous episode's resources first, as in-process; so does an episode's end.
A served OS env keeps no sandbox started ahead for the next episode (``prestart``, see
:data:`SERVING_DEFAULTS`): an idle session holds no sandbox, and the next reset starts one.

What the client gets wrong is a :class:`RequestError`, whose message says what to send
instead; the server turns it into OpenEnv's error shape.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

import agentgym_eppo
from agentgym_eppo.core.base_env import RESET_OPTIONS
from agentgym_eppo.registration import env_id_for

from .types import AgentBenchAction, AgentBenchObservation, AgentBenchState

SERVING_DEFAULTS: dict[str, dict[str, Any]] = {"os": {"prestart": False}}
"""``gym.make`` keywords a served task gets unless ``--env`` sets them: an OS env that
prestarts keeps the next episode's sandbox running from one episode's end to the next
reset, which for a session left open after its episode is a sandbox held for nothing."""


def gym_kwargs(task: str, env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords ``gym.make`` gets for ``task`` on the server.

    >>> gym_kwargs("os", {"split": "dev"})
    {'prestart': False, 'split': 'dev'}
    >>> gym_kwargs("os", {"prestart": True})
    {'prestart': True}
    """
    return {**SERVING_DEFAULTS.get(task, {}), **env_kwargs}


class RequestError(Exception):
    """A request this session cannot serve as sent (step before reset, a reset option
    the environment rejects, a session already closed). ``status_code`` is what the HTTP
    endpoints answer with."""

    status_code = 400


class SessionStateError(RequestError):
    """The request does not fit the session's state (no episode, episode over, closed)."""

    status_code = 409


class AgentBenchEnvironment(Environment[AgentBenchAction, AgentBenchObservation, AgentBenchState]):
    """One task's environment for one session.

    ``env_kwargs`` go to ``gym.make`` unchanged (``split``, ``tasks``, ``db_url``,
    ``max_turns``, ...). ``reset`` takes ``seed``, ``episode_id`` and the in-process
    reset options either as ``options={...}`` or as top-level keys (``index=3``).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, task: str, env_kwargs: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        env_id_for(task)  # an unknown task fails here, naming the known ones
        self.task = task
        self.env_kwargs = dict(env_kwargs or {})
        self._env: gym.Env[str, Any] | None = None
        self._closed = False
        self._state = AgentBenchState(task_id=task)
        self.last_active = time.time()
        """When a reset or step last started or ended (``time.time()``, OpenEnv's clock):
        the server's idle timeout counts from it, so that cheaper messages (state, MCP
        calls) do not keep a session alive."""

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> AgentBenchObservation:
        self._check_open()
        unknown = sorted(set(kwargs) - set(RESET_OPTIONS))
        if unknown:
            raise RequestError(
                f"unknown reset parameter(s) {', '.join(map(repr, unknown))}; known: seed, "
                f"episode_id, options, and the options {', '.join(RESET_OPTIONS)} at top level"
            )
        merged = {**dict(options or {}), **kwargs}
        self.last_active = time.time()
        env = self._gym_env()
        try:
            text, info = env.reset(seed=seed, options=merged)
        except (ValueError, TypeError, KeyError, IndexError) as error:
            # as in-process, a reset ends the running episode even when it is refused
            if self._state.status is not None:
                self._state.status = env.unwrapped.status.value  # type: ignore[attr-defined]
            raise RequestError(f"reset refused: {_message(error)}") from error
        finally:
            self.last_active = time.time()
        self._state = AgentBenchState(
            task_id=self.task,
            episode_id=episode_id,
            step_count=0,
            sample_id=str(info["sample_id"]),
            split=info.get("split"),
            turn=0,
            status=info["status"],
        )
        return AgentBenchObservation(text=text, info=info, reward=None, done=False)

    def step(
        self, action: AgentBenchAction, timeout_s: float | None = None, **kwargs: Any
    ) -> AgentBenchObservation:
        # timeout_s is accepted for OpenEnv's signature; every step is already bounded
        # by the environment's own limits (30 s per shell command, SQL timeouts, ...).
        self._check_open()
        if self._env is None or self._state.status is None:
            raise SessionStateError(
                "no episode in this session yet: send reset before step (an episode lives "
                "in a WebSocket session at /ws; HTTP /reset and /step are stateless)"
            )
        if self._state.status != "running":
            raise SessionStateError(
                f"the episode has ended ({self._state.status}): send reset to start another"
            )
        self.last_active = time.time()
        try:
            text, reward, terminated, truncated, info = self._env.step(action.env_action())
        finally:
            self.last_active = time.time()
        self._state.step_count += 1
        self._state.turn = int(info["turn"])
        self._state.status = info["status"]
        return AgentBenchObservation(
            text=text,
            info=info,
            reward=float(reward),
            done=bool(terminated or truncated),
            terminated=bool(terminated),
            truncated=bool(truncated),
        )

    @property
    def state(self) -> AgentBenchState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name=env_id_for(self.task),
            description=f"AgentBench's {self.task} task as a text environment (agentgym-eppo)",
            version=agentgym_eppo.__version__,
        )

    def close(self) -> None:
        """Free the episode's resources; the session serves nothing after this."""
        self._closed = True
        env, self._env = self._env, None
        if env is not None:
            env.close()

    def _gym_env(self) -> gym.Env[str, Any]:
        if self._env is None:
            self._env = gym.make(env_id_for(self.task), **gym_kwargs(self.task, self.env_kwargs))
        return self._env

    def _check_open(self) -> None:
        if self._closed:
            raise SessionStateError(
                "this session is closed (it idled past the server's timeout or the server "
                "is stopping): open a new session"
            )


def _message(error: BaseException) -> str:
    # KeyError's str() is the repr of its argument; show the message itself
    if isinstance(error, KeyError) and error.args:
        return str(error.args[0])
    return str(error)
