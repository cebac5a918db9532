"""MultiTaskVectorEnv: sub-envs of several tasks side by side, for multi-task RL.

Two ways to drive it:

* Gymnasium's ``VectorEnv`` API: ``reset`` and ``step`` over every slot, infos as
  dict-of-arrays with ``_key`` masks. Autoreset ``DISABLED`` (reset finished slots
  with ``reset(options={"reset_mask": mask})``) or ``NEXT_STEP``.
* The LLM-rollout API: ``step_some``/``reset_some``/``abort_some`` act on the slots
  the caller names (those whose model turn is done) and return plain per-slot infos.
  ``submit_steps``/``collect_steps`` do the same without waiting for the slowest
  slot: outcomes come back as they finish.

Slots ``[k*G, (k+1)*G)`` form group ``k``: they run one task and every reset puts
them on the same task instance, drawn from that task's stream (see
:mod:`agentgym_eppo.vector.sampling`). ``info["group"]`` is
``"<task_id>:<instance index>:<draw number>"``, shared by the group's G episodes and
by no other group's. A slot's k-th episode always plays its group's k-th draw, so the
members of a group stay together even when they are reset at different times.

A worker that dies ends the episodes it ran as ``task_error`` (reward = the env's
abort penalty, ``terminated``), with ``info["worker_restarted"] = True``,
``info["error"]`` and ``info["trajectory"]``, the episode so far as recorded here;
the worker is restarted and the vector env goes on.

No step can stall the vector env: a step (or abort) still unanswered
``step_timeout`` seconds after it was submitted (600 s by default, far above any
task's own limits) ends its slot's episode the same way, with
``info["error"]`` naming the deadline: its worker is killed and replaced, and the
other workers' slots go on. The serial back-end runs each step inside the caller's
own process, so there the deadline cannot apply.

Both are the work of the env's dispatcher (:mod:`agentgym_eppo.vector.dispatch`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from agentgym_eppo.core import Status, UnicodeText

from .dispatch import Dispatcher, Slot
from .host import Request, SubEnvSpec
from .layout import SlotsSpec, slot_specs
from .outcome import StepOutcome
from .sampling import InstanceStream
from .workers import WorkerPool, make_pool

DEFAULT_STEP_TIMEOUT = 600.0
"""Seconds a slot's step may take before its worker is replaced: generous, since an OS
command (30 s), a DB statement (60 s plus its watchdog) or a SPARQL request (30 s)
already stops itself well before."""


@dataclass
class _Draw:
    index: int
    key: str


class MultiTaskVectorEnv(VectorEnv[tuple[str, ...], Sequence[Any], np.ndarray]):
    """A ``gymnasium.vector.VectorEnv`` over sub-envs of different tasks.

    Args:
        tasks: ``{task_id or env id: number of slots}`` (groups of the tasks
            interleaved), or a list with one entry per slot: an env id, an
            ``(env_id, kwargs)`` pair or a :class:`SubEnvSpec`.
        group_size: G; consecutive groups of G slots share each task instance (GRPO).
        split: the task split every sub-env loads.
        env_kwargs: constructor keywords per task (key as in ``tasks``).
        backend: ``"serial"`` (in this process), ``"subprocess"`` (default) or ``"ray"``.
        seed: seeds the instance streams (``reset(seed=...)`` reseeds them).
        autoreset_mode: ``AutoresetMode.DISABLED`` (default) or ``NEXT_STEP``.
        envs_per_worker: slots per worker process/actor (default 1: none waits on another).
        backend_options: keywords of the back-end (``start_method``, ``actor_options``...).
        step_timeout: seconds a step may run before its slot ends as ``task_error`` and
            its worker is replaced (None: no deadline).

    Examples:
        Two KG and two DB slots in groups of two; an LLM trainer steps only the slots
        still running (``step_some``), here with an action no task accepts:

        >>> from agentgym_eppo.vector import MultiTaskVectorEnv
        >>> venv = MultiTaskVectorEnv({"kg": 2, "db": 2}, group_size=2, split="dev",
        ...                           backend="serial")
        >>> observations, infos = venv.reset(seed=0)
        >>> venv.num_envs, list(infos["task_id"])
        (4, ['kg', 'kg', 'db', 'db'])
        >>> infos["group"][0] == infos["group"][1]  # a group shares its task instance
        True
        >>> [(o.index, o.terminated, o.reward, o.info["status"])
        ...  for o in venv.step_some([0, 2], ["hello", "hello"])]
        [(0, True, -0.2, 'agent_invalid_action'), (2, True, -0.2, 'agent_invalid_action')]
        >>> venv.close()
    """

    def __init__(
        self,
        tasks: SlotsSpec,
        group_size: int = 1,
        split: str = "train",
        env_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
        backend: str = "subprocess",
        seed: int = 0,
        autoreset_mode: AutoresetMode | str = AutoresetMode.DISABLED,
        envs_per_worker: int = 1,
        backend_options: Mapping[str, Any] | None = None,
        step_timeout: float | None = DEFAULT_STEP_TIMEOUT,
    ) -> None:
        if step_timeout is not None and not step_timeout > 0:
            raise ValueError(f"step_timeout must be positive or None, got {step_timeout}")
        self.step_timeout = None if step_timeout is None else float(step_timeout)
        mode = AutoresetMode(autoreset_mode)
        if mode not in (AutoresetMode.DISABLED, AutoresetMode.NEXT_STEP):
            raise ValueError(
                f"autoreset_mode must be DISABLED or NEXT_STEP, got {mode.value}; "
                "SAME_STEP would hide the final observation an LLM rollout needs"
            )
        self.autoreset_mode = mode
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self.group_size = int(group_size)
        self.backend = backend
        self.specs: list[SubEnvSpec] = slot_specs(tasks, self.group_size, split, env_kwargs)
        self.num_envs = len(self.specs)
        self.single_observation_space = UnicodeText()
        self.single_action_space = UnicodeText()
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.closed = False
        self._pool: WorkerPool = make_pool(
            backend, self.specs, envs_per_worker, **dict(backend_options or {})
        )
        self._pool.start()
        descriptions = self._pool.descriptions
        self._slots = [
            Slot(
                i,
                descriptions[i]["task_id"],
                i // self.group_size,
                descriptions[i]["abort_penalty"],
            )
            for i in range(self.num_envs)
        ]
        self._instances: dict[str, int] = {}
        for slot in self._slots:
            count = descriptions[slot.index]["num_tasks"]
            if count is None:
                raise self._fail(
                    TypeError(f"slot {slot.index}: {self.specs[slot.index].name} has no num_tasks")
                )
            if self._instances.setdefault(slot.task_id, count) != count:
                raise self._fail(
                    ValueError(
                        f"task {slot.task_id!r} loads {self._instances[slot.task_id]} and "
                        f"{count} instances in different slots; give its slots one task set"
                    )
                )
        self._dispatcher = Dispatcher(
            self._pool, self._slots, [spec.name for spec in self.specs], self.step_timeout
        )
        self._seed = int(seed)
        self._reseed(self._seed)

    # ------------------------------------------------------------------ properties

    @property
    def task_ids(self) -> tuple[str, ...]:
        """The task family of every slot (``info["task_id"]``)."""
        return tuple(slot.task_id for slot in self._slots)

    @property
    def groups(self) -> tuple[int, ...]:
        """The group number of every slot (``slot // group_size``)."""
        return tuple(slot.group for slot in self._slots)

    @property
    def group_keys(self) -> tuple[str | None, ...]:
        """The ``info["group"]`` of every slot's current episode (None before its first)."""
        return tuple(slot.group_key for slot in self._slots)

    @property
    def running(self) -> np.ndarray:
        """Which slots have an episode waiting for an action."""
        return np.array([slot.running for slot in self._slots], dtype=bool)

    @property
    def pool(self) -> WorkerPool:
        """The worker back-end (for diagnostics and fault injection)."""
        return self._pool

    def trajectory(self, index: int) -> list[dict[str, Any]]:
        """The slot's current or last episode: ``{"observation"}`` then one
        ``{"action", "observation", "reward", "status"}`` per step."""
        return [dict(entry) for entry in self._slots[self._check_index(index)].trajectory]

    # ------------------------------------------------------------------ Gymnasium API

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Reset the slots of ``options["reset_mask"]`` (every slot when absent).

        ``seed`` (only with every slot resetting) reseeds the instance streams, so the
        same seed replays the same instances. Other ``options`` go to every sub-env's
        ``reset`` (``sample_id``/``index`` there override the sampler).
        """
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is None:
            indices = list(range(self.num_envs))
        else:
            if self.autoreset_mode is not AutoresetMode.DISABLED:
                raise ValueError("reset_mask is only for autoreset_mode=DISABLED")
            mask = np.asarray(mask)
            if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
                raise ValueError(
                    f"reset_mask must be a bool array of shape ({self.num_envs},), "
                    f"got {mask.dtype} {mask.shape}"
                )
            indices = [int(i) for i in np.flatnonzero(mask)]
        busy = sorted(set(indices) & self._dispatcher.in_flight_slots())
        if busy:
            raise RuntimeError(f"slots {busy} are being stepped; collect their outcomes first")
        if seed is not None:
            if isinstance(seed, list):
                raise TypeError("seed must be one int (the sampler's), not a list")
            if len(indices) != self.num_envs:
                raise ValueError("a seed can only be given when every slot resets")
            self._reseed(int(seed))
        infos: dict[str, Any] = {}
        for index, _, info in self._reset(indices, options, seeded=seed is not None):
            infos = self._add_info(infos, info, index)
        return self._observations(), infos

    def step(
        self, actions: Sequence[Any]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every slot. ``NEXT_STEP``: a slot that ended last step is reset instead
        (its action is ignored; reward 0). ``DISABLED``: every slot must be running."""
        if len(actions) != self.num_envs:
            raise ValueError(f"expected {self.num_envs} actions, got {len(actions)}")
        to_reset = [i for i in range(self.num_envs) if not self._slots[i].running]
        if to_reset and self.autoreset_mode is AutoresetMode.DISABLED:
            raise RuntimeError(
                f"slots {to_reset} have ended; reset them with "
                "reset(options={'reset_mask': mask}) before step()"
            )
        to_step = [i for i in range(self.num_envs) if self._slots[i].running]
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=bool)
        truncated = np.zeros(self.num_envs, dtype=bool)
        infos: dict[str, Any] = {}
        self.submit_steps(to_step, [actions[i] for i in to_step])
        resets = self._reset(to_reset, {}, seeded=False) if to_reset else []
        for index, _, info in resets:
            infos = self._add_info(infos, info, index)
        for outcome in self._dispatcher.collect_all(to_step):
            rewards[outcome.index] = outcome.reward
            terminated[outcome.index] = outcome.terminated
            truncated[outcome.index] = outcome.truncated
            infos = self._add_info(infos, outcome.info, outcome.index)
        return self._observations(), rewards, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        """Close every sub-env and stop every worker; nothing is left behind."""
        self._pool.close()

    # ------------------------------------------------------------------ LLM-rollout API

    def step_some(self, indices: Sequence[int], actions: Sequence[Any]) -> list[StepOutcome]:
        """Step only the named slots (each must be running); outcomes in ``indices`` order.

        An action may be :data:`~agentgym_eppo.vector.EXPERT_ACTION`: the slot's expert acts.
        """
        self.submit_steps(indices, actions)
        return self._dispatcher.collect_all(indices)

    def submit_steps(self, indices: Sequence[int], actions: Sequence[Any]) -> None:
        """Start stepping the named slots; :meth:`collect_steps` hands back the outcomes."""
        indices = self._check_indices(indices)
        if len(actions) != len(indices):
            raise ValueError(f"got {len(actions)} actions for {len(indices)} slots")
        for index in indices:
            slot = self._slots[index]
            if not slot.running:
                raise RuntimeError(
                    f"slot {index} has no running episode; reset_some([{index}]) first"
                )
            if index in self._dispatcher.in_flight_slots():
                raise RuntimeError(
                    f"slot {index} is already being stepped; collect its outcome first"
                )
        for index, action in zip(indices, actions, strict=True):
            self._dispatcher.submit_step(index, action)

    def collect_steps(self, timeout: float | None = None) -> list[StepOutcome]:
        """Outcomes of submitted steps that have finished, waiting up to ``timeout``
        seconds (``None``: until at least one) when none has; fast slots need not wait
        for slow ones."""
        return self._dispatcher.collect(timeout)

    def reset_some(self, indices: Sequence[int]) -> list[tuple[int, str, dict[str, Any]]]:
        """Start fresh episodes in the named slots: ``(index, observation, info)`` each.

        The sampler picks the instances; slots of one group get one instance.
        """
        return self._reset(self._check_indices(indices), {}, seeded=False)

    def abort_some(
        self,
        indices: Sequence[int],
        status: Status | str = Status.AGENT_CONTEXT_LIMIT,
        message: str = "",
    ) -> list[StepOutcome]:
        """End the named slots' episodes from outside (e.g. the model's context is full)
        with an abnormal ``status``: abort penalty, ``terminated``."""
        status = Status(status)
        if not status.is_abort:
            raise ValueError(f"abort needs an abnormal status, got {status.value}")
        indices = self._check_indices(indices)
        for index in indices:
            if not self._slots[index].running:
                raise RuntimeError(f"slot {index} has no running episode to abort")
            self._dispatcher.submit_abort(index, status, message)
        return self._dispatcher.collect_all(indices)

    def call_some(self, indices: Sequence[int], name: str, *args: Any, **kwargs: Any) -> list[Any]:
        """Call ``env.unwrapped.<name>(*args, **kwargs)`` (or read the attribute) in the
        named slots, e.g. ``call_some([0, 1], "expert_action")``."""
        indices = self._check_indices(indices)
        requests = [self._dispatcher.request(i, "call", (name, args, kwargs)) for i in indices]
        replies = self._dispatcher.exchange(requests)
        return [replies[r.request_id] for r in requests]

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """:meth:`call_some` over every slot (Gymnasium's ``VectorEnv.call``)."""
        return tuple(self.call_some(range(self.num_envs), name, *args, **kwargs))

    # ------------------------------------------------------------------ internals

    def _reseed(self, seed: int) -> None:
        self._seed = seed
        self._streams = {task: InstanceStream(task, n, seed) for task, n in self._instances.items()}
        self._group_draws: dict[int, dict[int, _Draw]] = {}
        for slot in self._slots:
            slot.episodes = 0

    def _draw_for(self, slot: Slot) -> _Draw:
        """The group's draw for the slot's next episode (drawn on first demand)."""
        draws = self._group_draws.setdefault(slot.group, {})
        number = slot.episodes
        if number not in draws:
            stream = self._streams[slot.task_id]
            index = stream.next()
            draws[number] = _Draw(index, f"{slot.task_id}:{index}:{stream.drawn - 1}")
        draw = draws[number]
        members = self._slots[slot.group * self.group_size : (slot.group + 1) * self.group_size]
        if all(other.episodes > number or other is slot for other in members):
            del draws[number]  # every member has taken it
        return draw

    def _reset(
        self, indices: Sequence[int], options: Mapping[str, Any], *, seeded: bool
    ) -> list[tuple[int, str, dict[str, Any]]]:
        busy = sorted(set(indices) & self._dispatcher.in_flight_slots())
        if busy:
            raise RuntimeError(f"slots {busy} are being stepped; collect their outcomes first")
        requests: list[tuple[Request, _Draw]] = []
        for index in indices:
            slot = self._slots[index]
            draw = self._draw_for(slot)
            slot.episodes += 1
            reset_options = {"index": draw.index, **options}
            payload = {"seed": self._seed + index if seeded else None, "options": reset_options}
            requests.append((self._dispatcher.request(index, "reset", payload), draw))
        replies = self._dispatcher.exchange([request for request, _ in requests], retry_lost=True)
        results = []
        for request, draw in requests:
            observation, info = replies[request.request_id]
            slot = self._slots[request.slot]
            slot.running, slot.lost_reason = True, None
            slot.sample_id, slot.group_key, slot.turn = info.get("sample_id"), draw.key, 0
            slot.observation = observation
            slot.trajectory = [{"observation": observation}]
            info = {**info, "group": draw.key}
            results.append((request.slot, observation, info))
        return results

    def _observations(self) -> tuple[str, ...]:
        return tuple(slot.observation for slot in self._slots)

    def _check_index(self, index: int) -> int:
        if not isinstance(index, (int, np.integer)) or not 0 <= index < self.num_envs:
            raise IndexError(f"slot index {index!r} out of range 0..{self.num_envs - 1}")
        return int(index)

    def _check_indices(self, indices: Sequence[int]) -> list[int]:
        checked = [self._check_index(i) for i in indices]
        if len(set(checked)) != len(checked):
            raise ValueError(f"slot indices must be distinct, got {list(indices)}")
        return checked

    def _fail(self, error: Exception) -> Exception:
        self._pool.close()
        return error

    def __repr__(self) -> str:
        counts: dict[str, int] = {}
        for task in self.task_ids:
            counts[task] = counts.get(task, 0) + 1
        return (
            f"MultiTaskVectorEnv({counts}, group_size={self.group_size}, backend={self.backend!r})"
        )
