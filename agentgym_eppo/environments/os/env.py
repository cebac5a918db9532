"""``AgentBench-OS-v0``: AgentBench's OS interaction task as a Gymnasium text environment.

Each episode gets a fresh sandbox (bubblewrap by default, Docker with
``backend="docker"``) holding one persistent interactive bash. The task's ``init``
scripts run before the first observation and its ``start`` command is left running in
the background of the agent's shell, as in AgentBench. Tools (AgentBench's
function-calling names): ``bash_action(script)`` runs a command, ``answer_action(answer)``
submits an answer, ``finish_action(thought)`` submits its ``thought`` as the answer. The
answer is judged in the episode's sandbox (:mod:`.evaluation`), against the example's
output taken before the agent's first action; then the sandbox is torn down.

Outputs are cut AgentBench's way: over 800 characters, the first 780 and
``"\\n[truncated because the output is too long]"``. A command that runs past
``command_timeout`` (30 s) is interrupted with Ctrl-C and the observation says so; a
shell that exits or cannot be interrupted is replaced by a fresh one (files and
background processes stay). A sandbox that fails while the episode is set up is
replaced once (:data:`START_ATTEMPTS`, counted in ``start_retries``). After a command,
a shell that cannot come back while the backend's own parts still run (the agent's
start-up files block it, the agent killed the sandbox's processes) ends the episode
with ``agent_invalid_action``, penalised like any abort; only a failure of those
parts is ``task_error``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from agentgym_eppo.core import (
    AgentBenchEnv,
    FunctionCall,
    Status,
    TaskFailure,
    TaskFormatError,
    TaskSet,
    ToolResult,
    string_tool,
)

from . import expert
from .evaluation import expected_output, judge
from .prestart import SandboxReserve
from .sandbox import (
    DEFAULT_COMMAND_TIMEOUT,
    ProcessResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
)
from .tasks import MissingScript, OSTask, load_tasks

logger = logging.getLogger(__name__)

START_ATTEMPTS = 2
"""A sandbox that fails before the agent's first action (its shell does not start, an init
script is killed) is replaced once by a fresh one: a backend fault, not the agent's."""

STEP_OVERHEAD = 40.0
"""Seconds a step may take beyond its command or judging limit: sending the command to a
terminal that does not read it (at most 10 s), the interrupt of a command past its limit
(Ctrl-C, the host-side kill and three 1.5 s waits for the shell: under 5 s) and a
shell's restart (at most 20 s: 10 s for the sandbox's answer, 10 s for the shell's)."""

AGENTBENCH_TRUNCATION = "\n[truncated because the output is too long]"
AGENTBENCH_KEEP = 780

SYSTEM_PROMPT = (
    "You are an assistant that will act like a person. I will play the role of a linux "
    "(ubuntu) operating system. Your goal is to implement the operations required by me "
    "or answer the question proposed by me. In each turn, call exactly one of the tools: "
    "bash_action to run bash code (it should not read any input), answer_action when you "
    "have the answer to the question, or finish_action when you have finished the "
    "requested operation. If the output is too long, I will truncate it; the truncated "
    "output is not complete, and you have to deal with that yourself."
)

TOOLS = (
    string_tool(
        "bash_action",
        "Execute bash code in the Linux environment and return its output.",
        script="The bash code to execute.",
    ),
    string_tool(
        "answer_action",
        "Submit the answer to the question; this ends the task.",
        answer="The answer to the question.",
    ),
    string_tool(
        "finish_action",
        "Indicate that the requested operation is finished; this ends the task.",
        thought="Why the task is finished (submitted as the answer).",
    ),
)


class OSEnv(AgentBenchEnv[OSTask]):
    """AgentBench's OS task (see the module docstring).

    Args:
        tasks: None (the shipped set), a path to an AgentBench OS json/jsonl file (or
            ours), or a list of task dicts / :class:`OSTask`.
        split: "train", "dev" or "test" (the shipped set's split).
        backend: "bwrap" (embedded default) or "docker".
        scripts_dir: where file references of AgentBench tasks that are not standard
            checkers live (AgentBench's ``data/os_interaction/scripts/<set>``).
        command_timeout: seconds before a command is interrupted (AgentBench: 30).
        script_timeout: seconds an init or example script may run, and the budget that
            all check scripts of one answer share (default: ``command_timeout``).
        limits: memory, CPU, process, disk and file-size limits of each sandbox.
        image: Docker image for tasks that name none (AgentBench's ``local-os/default``).
        root_dir: bwrap only: a full root filesystem to use instead of the host's /usr.
        prestart: keep the next episode's sandbox started in the background
            (:mod:`.prestart`), so that ``reset`` does not wait for it.
    """

    task_id = "os"
    tools = TOOLS
    default_max_turns = 8

    def __init__(
        self,
        tasks: str | Sequence[Any] | None = None,
        split: str = "train",
        *,
        backend: str = "bwrap",
        scripts_dir: str | Path | None = None,
        command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
        script_timeout: float | None = None,
        limits: SandboxLimits | None = None,
        image: str = "local-os/default",
        root_dir: str | Path | None = None,
        output_limit: int = 800,
        prestart: bool = True,
        **kwargs: Any,
    ) -> None:
        if backend not in ("bwrap", "docker"):
            raise ValueError(f"backend must be 'bwrap' or 'docker', got {backend!r}")
        super().__init__(tasks, split, output_limit=0, **kwargs)
        self.backend = backend
        self.scripts_dir = scripts_dir
        self.command_timeout = float(command_timeout)
        self.script_timeout = float(command_timeout if script_timeout is None else script_timeout)
        self.limits = limits or SandboxLimits()
        self.image = image
        self.root_dir = root_dir
        self.agentbench_output_limit = int(output_limit)
        self._sandbox: Sandbox | None = None
        self.start_retries = 0
        """Episodes whose sandbox failed before the agent's first action and was started again."""
        self._last_command: str | None = None
        self._last_output: str | None = None
        self._expected: ProcessResult | None = None
        self._reserve = SandboxReserve(
            self._new_sandbox, enabled=prestart, threaded=backend == "docker"
        )

    # ------------------------------------------------------------------ task hooks

    def _load_tasks(self, tasks: str | Sequence[Any] | None, split: str) -> TaskSet[OSTask]:
        return load_tasks(tasks, split, scripts_dir=self.scripts_dir)

    def _begin_episode(self, record: OSTask) -> str:
        if record.missing:
            raise TaskFormatError(
                f"{record.sample_id}: " + "; ".join(missing.reason for missing in record.missing)
            )
        self._last_command = self._last_output = None
        self._expected = None
        image = record.image or self.image
        for attempt in range(START_ATTEMPTS):
            self._sandbox = self._reserve.take(image) if attempt == 0 else self._new_sandbox(image)
            try:
                self._sandbox.ensure_ready()
                self._sandbox.check_alive()
                self._prepare(record, self._sandbox)
                break
            except BaseException as error:
                self._close_sandbox()
                if not isinstance(error, SandboxError) or attempt + 1 == START_ATTEMPTS:
                    raise
                self.start_retries += 1
                logger.warning("%s: starting again in a new sandbox: %s", record.sample_id, error)
        return (
            "Now, I will start a new problem in a new OS. My problem is:\n\n" + record.description
        )

    def _prepare(self, record: OSTask, sandbox: Sandbox) -> None:
        """The task's init scripts, its start command in the agent's shell, then its
        example's output (the expected answer) over the state they left."""
        for script in record.init:
            assert not isinstance(script, MissingScript)
            started = time.monotonic()
            result = sandbox.run_script(script.language, script.code, timeout=self.script_timeout)
            if result.exit_code != 0:
                state = sandbox.state()
                raise SandboxError(
                    f"{record.sample_id}: init script failed with exit code "
                    f"{result.exit_code} after {time.monotonic() - started:.1f} s"
                    f"{f' ({state})' if state else ''}: {result.output[-400:]}"
                )
        if record.start is not None:
            assert not isinstance(record.start, MissingScript)
            sandbox.run_command(record.start.code, self.command_timeout)
        self._expected = expected_output(record, sandbox, timeout=self.script_timeout)

    def _new_sandbox(self, image: Hashable) -> Sandbox:
        if self.backend == "docker":
            from .sandbox_docker import DockerSandbox

            return DockerSandbox(self.limits, image=str(image))
        from .sandbox_bwrap import BwrapSandbox

        return BwrapSandbox(self.limits, root_dir=self.root_dir, wait=False)

    def _run_tool(self, call: FunctionCall) -> ToolResult:
        sandbox = self._sandbox
        if sandbox is None:
            raise TaskFailure("the sandbox is gone")
        if call.name == "bash_action":
            return ToolResult(self._bash(sandbox, call.arguments["script"]))
        answer = call.arguments["answer" if call.name == "answer_action" else "thought"]
        try:
            correct = judge(
                self.record,
                answer,
                sandbox,
                expected=self._expected,
                time_limit=self.script_timeout,
            )
        except SandboxError as error:
            raise TaskFailure(f"Task error: the sandbox failed while judging: {error}") from None
        return ToolResult(
            "Correct." if correct else "Wrong.",
            done=True,
            reward=1.0 if correct else 0.0,
            info={"answer": answer},
        )

    def _bash(self, sandbox: Sandbox, script: str) -> str:
        try:
            result = sandbox.run_command(script, self.command_timeout)
            notes = []
            if result.timed_out:
                notes.append(
                    f"[the command ran longer than {self.command_timeout:g} s and was interrupted]"
                )
            if result.shell_exited:
                sandbox.restart_shell()
                notes.append("[the shell exited; a new shell was started]")
        except SandboxError as error:
            if error.inside:
                # the backend still runs: the command broke the machine from inside
                # (start-up files that block, the processes it killed), and an agent
                # must not leave the loss that way
                raise TaskFailure(
                    f"The command left the machine without a working shell: {error}",
                    status=Status.AGENT_INVALID_ACTION,
                ) from None
            raise TaskFailure(f"Task error: the sandbox died: {error}") from None
        self._last_command, self._last_output = script, result.output
        text = self._truncate(result.output)
        if notes:
            text = (text + "\n" if text and not text.endswith("\n") else text) + "\n".join(notes)
        if not text:
            return "The output of the OS is empty."
        return "The output of the OS:\n\n" + text

    def _truncate(self, text: str) -> str:
        limit = self.agentbench_output_limit
        if 0 < limit < len(text):
            return text[: min(AGENTBENCH_KEEP, limit)] + AGENTBENCH_TRUNCATION
        return text

    def _end_episode(self) -> None:
        self._close_sandbox()
        self._reserve.refill(self.record.image or self.image)

    def _close_backend(self) -> None:
        self._reserve.close()

    def _close_sandbox(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    @property
    def step_time_limit(self) -> float:
        """Seconds within which ``step`` returns, whatever the action (bubblewrap; Docker
        adds the engine's own latency): the command limit or the judging budget, plus
        :data:`STEP_OVERHEAD`. The vector env's step deadline must stay above it."""
        return max(self.command_timeout, self.script_timeout) + STEP_OVERHEAD

    def expert_action(self) -> dict[str, Any]:
        """Run the example solution, then answer with its output (see :mod:`.expert`)."""
        return expert.expert_action(self.record, self._last_command, self._last_output)

    @property
    def sandbox(self) -> Sandbox | None:
        """The running episode's sandbox (None between episodes)."""
        return self._sandbox

    @property
    def system_prompt(self) -> str:
        return SYSTEM_PROMPT
