"""The OS expert: runs the task's example solution in the agent's shell, then answers.

For a ``match`` task with a fixed answer the expert answers at once. For a ``check``
task it sends the example as a ``bash_action`` and then submits that command's output,
stripped, as its answer (AgentBench's checkers compare against the same example's
output, and operation tasks ignore the answer). A regex-only task without an example
has no expert.

The expert takes over from any state of the episode: it answers only with the output of
its own example command (the episode's *last* command), never with whatever an earlier
command printed; after earlier commands it first goes back to ``/root``, where
AgentBench runs the example, since a ``cd`` of the agent's would change what a
relative path in the example means.
"""

from __future__ import annotations

import shlex
from typing import Any

from .tasks import OSTask, Script


def example_command(task: OSTask) -> str | None:
    """The example as one bash command line (python examples through ``python3 -c``)."""
    if not isinstance(task.example, Script):
        return None
    if task.example.language == "python":
        return f"python3 -c {shlex.quote(task.example.code)}"
    return task.example.code


RETURN_HOME = "cd /root\n"
"""Put before the example when earlier commands may have left the shell elsewhere."""


def expert_action(
    task: OSTask, last_command: str | None, last_output: str | None
) -> dict[str, Any]:
    """The expert's next call, given the episode's last command and its output (None
    before any command)."""
    if task.match is not None and task.match.answer is not None:
        return {"name": "answer_action", "arguments": {"answer": task.match.answer}}
    command = example_command(task)
    if command is None:
        raise ValueError(
            f"{task.sample_id}: no fixed answer and no example: the expert cannot solve it"
        )
    if last_command in (command, RETURN_HOME + command) and last_output is not None:
        return {"name": "answer_action", "arguments": {"answer": last_output.strip()}}
    script = command if last_command is None else RETURN_HOME + command
    return {"name": "bash_action", "arguments": {"script": script}}
