"""Scoring an OS episode as AgentBench does, in the episode's own sandbox after it ends.

``match``: the answer (stripped unless ``strip`` is false) equals ``answer``, or
``regex`` is found in it. ``check``: the scripts run in order with arguments
``[answer, outputs...]``; a ``null`` step runs the task's example solution and appends
its output; a standard checker runs in-process on the same arguments; any non-zero
exit fails. Script output is stdout and stderr together, as ``docker exec`` gives it.
"""

from __future__ import annotations

import re

from agentgym_eppo.core import TaskFormatError

from .checkers import STANDARD_CHECKERS
from .sandbox import Sandbox
from .tasks import MissingScript, OSTask, Script, StandardCheck


def judge(task: OSTask, answer: str, sandbox: Sandbox, *, script_timeout: float = 60.0) -> bool:
    """True when ``answer`` solves ``task``; raises SandboxError if the sandbox died."""
    if task.match is not None:
        text = answer.strip() if task.match.strip else answer
        if task.match.answer is not None:
            return text == task.match.answer
        return re.search(task.match.regex or "", text) is not None
    params = [str(answer)]
    for step in task.check:
        script = task.example if step is None else step
        if isinstance(script, StandardCheck):
            if not STANDARD_CHECKERS[script.name](params):
                return False
            params.append("")
            continue
        if isinstance(script, MissingScript) or script is None:
            reason = script.reason if script is not None else "no example"
            raise TaskFormatError(f"{task.sample_id}: {reason}")
        assert isinstance(script, Script)
        result = sandbox.run_script(script.language, script.code, params, timeout=script_timeout)
        if result.exit_code != 0:
            return False
        params.append(result.output)
    return True
