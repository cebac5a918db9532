"""Scoring an OS episode: AgentBench's rules, with the expected answer taken before the
agent acts.

``match``: the answer (stripped unless ``strip`` is false) equals ``answer``, or
``regex`` is found in it. ``check``: the steps run in order with arguments
``[answer, outputs...]``; a ``null`` step appends the output of the task's example
solution, a standard checker runs in-process on the same arguments, any other script
runs in the episode's sandbox; a failing step (non-zero exit) fails the answer. Script
output is stdout and stderr together, as ``docker exec`` gives it.

The example's output is taken by :func:`expected_output` when the episode starts,
after the task's ``init`` and ``start`` and before the agent's first action, and kept
out of the agent's sight: AgentBench runs it at judging time over whatever the agent
left, so an agent that empties the directories a question is about and answers ``0``
scored. Check scripts still run at judging time: they are how an operation task reads
what the agent did.

Judging one answer is bounded: its scripts share one budget of ``time_limit`` seconds
(each is killed when the budget is spent), so a check blocked on a FIFO the agent
planted costs at most that budget, whatever the number of steps.
"""

from __future__ import annotations

import re
import time

from agentgym_eppo.core import TaskFormatError

from .checkers import STANDARD_CHECKERS
from .sandbox import ProcessResult, Sandbox
from .tasks import MissingScript, OSTask, Script, StandardCheck


def uses_example(task: OSTask) -> bool:
    """True when the task's verdict compares against its example's output (a ``null``
    step): its expected answer comes from the state the episode started in."""
    return task.match is None and None in task.check


def expected_output(task: OSTask, sandbox: Sandbox, *, timeout: float) -> ProcessResult | None:
    """Run the task's example over the state ``init``/``start`` left (call it before the
    agent's first action); None when no step of the task needs it. What the example
    prints is the judge's alone; what it writes stays in the sandbox."""
    if not uses_example(task):
        return None
    example = task.example
    if not isinstance(example, Script):
        reason = example.reason if isinstance(example, MissingScript) else "no example"
        raise TaskFormatError(f"{task.sample_id}: {reason}")
    return sandbox.run_script(example.language, example.code, timeout=timeout)


def judge(
    task: OSTask,
    answer: str,
    sandbox: Sandbox,
    *,
    expected: ProcessResult | None,
    time_limit: float,
) -> bool:
    """True when ``answer`` solves ``task``; ``expected`` is what :func:`expected_output`
    returned when the episode started. Raises SandboxError if the sandbox died."""
    if task.match is not None:
        text = answer.strip() if task.match.strip else answer
        if task.match.answer is not None:
            return text == task.match.answer
        return re.search(task.match.regex or "", text) is not None
    if uses_example(task) and expected is None:
        raise ValueError(f"{task.sample_id}: judging needs the example's output from the start")
    deadline = time.monotonic() + time_limit
    params = [str(answer)]
    for step in task.check:
        if step is None:
            assert expected is not None
            if expected.exit_code != 0:
                return False
            params.append(expected.output)
            continue
        if isinstance(step, StandardCheck):
            if not STANDARD_CHECKERS[step.name](params):
                return False
            params.append("")
            continue
        if isinstance(step, MissingScript):
            raise TaskFormatError(f"{task.sample_id}: {step.reason}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False  # the budget is spent: the answer is not shown to be right
        result = sandbox.run_script(step.language, step.code, params, timeout=remaining)
        if result.exit_code != 0:
            return False
        params.append(result.output)
    return True
