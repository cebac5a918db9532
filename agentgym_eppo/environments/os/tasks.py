"""OS task records and the loader of AgentBench's OS task files (and of ours, the same format).

A task is AgentBench's JSON object::

    {"description": "...",
     "create": {"image": "...", "init": <script> | [<script>, ...]},   # optional
     "start": <script>,                                                # optional, background
     "evaluation": {"match": "6" | {"answer": "6", "strip": true} | {"regex": "..."}}
                 | {"check": <script> | [null | <script>, ...], "example": <script>},
     "labels": [...]}

where a script is a string (bash), ``{"code": ..., "language": ...}`` or
``{"file": ..., "language": ...}``. File references resolve in this order: a name in
:data:`~.checkers.STANDARD_CHECKERS` (``check/integer-match.py``) is the project's own
checker; anything else is read from the user's ``scripts_dir`` (one of AgentBench's
scripts that pastes the agent's output into code is swapped for the project's version,
:func:`~.checkers.replacement`). A reference that cannot
be resolved does not stop the file from loading: the task records why, and starting
that task raises :class:`~agentgym_eppo.core.TaskFormatError` naming the file. A
reference that leads out of ``scripts_dir`` (``../``, an absolute path, a symbolic link
pointing out) is refused when the file loads, with a TaskFormatError naming it: a task
file can read no other file of the host.
Malformed parts that AgentBench itself tolerates (``"create"`` given as a list) are
read as AgentBench reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from agentgym_eppo.core import TaskFormatError, TaskRecord, TaskSet, asset_path, read_json_or_jsonl

from .checkers import STANDARD_CHECKERS, replacement
from .sandbox import SCRIPT_LANGUAGES


@dataclass(frozen=True)
class Script:
    """Code in a language the sandbox runs (bash or python)."""

    language: str
    code: str


@dataclass(frozen=True)
class StandardCheck:
    """A reference to one of the project's standard checkers."""

    name: str


@dataclass(frozen=True)
class MissingScript:
    """A file reference that could not be read; starting the task reports ``reason``."""

    reference: str
    reason: str


CheckStep = Script | StandardCheck | MissingScript | None
"""One entry of ``evaluation.check``; None runs the example and appends its output."""


@dataclass(frozen=True)
class Match:
    """``evaluation.match``: exact (after strip) or a regular expression searched for."""

    answer: str | None = None
    regex: str | None = None
    strip: bool = True


@dataclass(frozen=True)
class OSTask(TaskRecord):
    """One OS task instance (see the module docstring for the file format)."""

    description: str
    init: tuple[Script | MissingScript, ...] = ()
    start: Script | MissingScript | None = None
    match: Match | None = None
    check: tuple[CheckStep, ...] = ()
    example: Script | MissingScript | None = None
    image: str | None = None
    labels: tuple[str, ...] = field(default_factory=tuple)

    @property
    def missing(self) -> list[MissingScript]:
        """The file references of this task that could not be read."""
        parts = [*self.init, self.start, *self.check, self.example]
        return [part for part in parts if isinstance(part, MissingScript)]


def load_tasks(
    source: str | Path | Sequence[Any] | None,
    split: str,
    *,
    scripts_dir: str | Path | None = None,
) -> TaskSet[OSTask]:
    """``None``: the shipped ``split``; a path: an AgentBench/ours file; else records/dicts."""
    if source is None:
        path = asset_path("os", f"{split}.jsonl.gz")
        rows = read_json_or_jsonl(path)
        return TaskSet(
            [parse_task(row, f"os-{split}-{i:04d}", None) for i, row in enumerate(rows)],
            name=str(path),
        )
    if isinstance(source, (str, Path)):
        path = Path(source)
        rows = read_json_or_jsonl(path)
        stem = path.name.split(".")[0]
        records = [
            parse_task(row, f"{stem}-{index:05d}", scripts_dir, where=f"{path}[{index}]")
            for index, row in enumerate(rows)
        ]
        return TaskSet(records, name=str(path))
    records = []
    for index, item in enumerate(source):
        if isinstance(item, OSTask):
            records.append(item)
        else:
            records.append(
                parse_task(item, f"task-{index:05d}", scripts_dir, where=f"tasks[{index}]")
            )
    return TaskSet(records, name="tasks")


def parse_task(
    item: Any, default_id: str, scripts_dir: str | Path | None, *, where: str = "task"
) -> OSTask:
    """One AgentBench task object -> :class:`OSTask`; raises TaskFormatError naming ``where``."""
    if not isinstance(item, Mapping):
        raise TaskFormatError(f"{where}: a task must be a JSON object, got {type(item).__name__}")
    description = item.get("description")
    if not isinstance(description, str) or not description.strip():
        raise TaskFormatError(f"{where}: 'description' must be a non-empty string")
    resolver = _Resolver(scripts_dir, where)
    create = item.get("create")
    init: tuple[Script | MissingScript, ...] = ()
    image = None
    if isinstance(create, Mapping):
        image = create.get("image") if isinstance(create.get("image"), str) else None
        raw_init = create.get("init")
        if raw_init is not None:
            entries = raw_init if isinstance(raw_init, list) else [raw_init]
            init = tuple(
                resolver.script(entry, "create.init") for entry in entries if entry is not None
            )
    start = resolver.script(item["start"], "start") if item.get("start") is not None else None
    evaluation = item.get("evaluation")
    if not isinstance(evaluation, Mapping):
        raise TaskFormatError(f"{where}: 'evaluation' must be an object with 'match' or 'check'")
    match = None
    check: tuple[CheckStep, ...] = ()
    example = None
    if "match" in evaluation:
        match = _parse_match(evaluation["match"], where)
    elif "check" in evaluation:
        raw_check = evaluation["check"]
        steps = raw_check if isinstance(raw_check, list) else [raw_check]
        check = tuple(resolver.check_step(step) for step in steps)
        if evaluation.get("example") is not None:
            example = resolver.script(evaluation["example"], "evaluation.example")
        if None in check and example is None:
            raise TaskFormatError(
                f"{where}: 'check' runs the example (null) but there is no 'example'"
            )
    else:
        raise TaskFormatError(f"{where}: 'evaluation' needs 'match' or 'check'")
    if not match and not check:
        raise TaskFormatError(f"{where}: 'evaluation' has an empty 'match' or 'check'")
    labels = item.get("labels") or ()
    sample_id = str(item.get("sample_id", default_id))
    return OSTask(
        sample_id=sample_id,
        description=description,
        init=init,
        start=start,
        match=match,
        check=check,
        example=example,
        image=image,
        labels=tuple(str(label) for label in labels) if isinstance(labels, list) else (),
    )


def _parse_match(raw: Any, where: str) -> Match:
    if isinstance(raw, str):
        return Match(answer=raw, strip=True)
    if isinstance(raw, Mapping):
        strip = bool(raw.get("strip", True))
        if isinstance(raw.get("answer"), str):
            return Match(answer=raw["answer"], strip=strip)
        if isinstance(raw.get("regex"), str):
            return Match(regex=raw["regex"], strip=strip)
    raise TaskFormatError(
        f"{where}: 'evaluation.match' must be a string or {{'answer'|'regex': ...}}"
    )


class _Resolver:
    """Turns AgentBench's script objects into :class:`Script` (reading files from scripts_dir)."""

    def __init__(self, scripts_dir: str | Path | None, where: str) -> None:
        self.scripts_dir = Path(scripts_dir) if scripts_dir is not None else None
        self.where = where

    def check_step(self, raw: Any) -> CheckStep:
        if raw is None:
            return None
        if isinstance(raw, Mapping) and isinstance(raw.get("file"), str):
            name = PurePosixPath(raw["file"]).stem
            if name in STANDARD_CHECKERS:
                return StandardCheck(name)
        return self.script(raw, "evaluation.check")

    def script(self, raw: Any, part: str) -> Script | MissingScript:
        if isinstance(raw, str):
            return Script("bash", raw)
        if not isinstance(raw, Mapping):
            raise TaskFormatError(f"{self.where}: {part} must be a string or a script object")
        language = raw.get("language", "bash")
        if language not in SCRIPT_LANGUAGES:
            raise TaskFormatError(
                f"{self.where}: {part} has language {language!r}; supported: {', '.join(SCRIPT_LANGUAGES)}"
            )
        if isinstance(raw.get("code"), str):
            return Script(language, raw["code"])
        if isinstance(raw.get("file"), str):
            return self._read_file(raw["file"], language)
        raise TaskFormatError(f"{self.where}: {part} needs 'code' or 'file'")

    def _read_file(self, reference: str, language: str) -> Script | MissingScript:
        if self.scripts_dir is None:
            return MissingScript(
                reference, f"{reference!r} needs scripts_dir= (AgentBench's scripts folder)"
            )
        root = self.scripts_dir.resolve()
        path = (root / reference).resolve()  # links followed: a link out is caught too
        if not path.is_relative_to(root):
            raise TaskFormatError(
                f"{self.where}: the file reference {reference!r} leads out of scripts_dir "
                f"({root}); task files may name only files inside it"
            )
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            return MissingScript(reference, f"cannot read {path}: {error}")
        return Script(language, replacement(text) or text)
