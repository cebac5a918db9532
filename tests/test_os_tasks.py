"""Loading OS tasks: AgentBench's file format as it is, file references, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentgym_eppo.core import TaskFormatError
from agentgym_eppo.environments.os.tasks import (
    Match,
    MissingScript,
    Script,
    StandardCheck,
    load_tasks,
    parse_task,
)


def write(tmp_path: Path, tasks: object, name: str = "tasks.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(tasks))
    return path


def test_agentbench_forms_of_scripts_and_match_load(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        [
            {
                "description": "count",
                "create": {"local": "default", "init": "touch /root/a"},
                "evaluation": {
                    "check": [None, {"language": "python", "file": "check/integer-match.py"}],
                    "example": "ls | wc -l",
                },
            },
            {"description": "regex", "evaluation": {"match": {"regex": "^a+$", "strip": False}}},
            {
                "description": "list create",
                "create": [None, {"file": "x"}],
                "evaluation": {"match": "1"},
            },
            {
                "description": "several inits",
                "create": {
                    "init": [{"code": "echo 1"}, {"code": "print(2)", "language": "python"}]
                },
                "start": "sleep 9 &",
                "evaluation": {"check": {"code": "exit 0"}},
            },
        ],
    )
    tasks = load_tasks(path, "dev")
    assert [task.sample_id for task in tasks] == [f"tasks-0000{i}" for i in range(4)]
    count, regex, listed, several = tasks
    assert count.init == (Script("bash", "touch /root/a"),)
    assert count.check == (None, StandardCheck("integer-match"))
    assert count.example == Script("bash", "ls | wc -l")
    assert regex.match == Match(regex="^a+$", strip=False)
    assert listed.init == () and listed.match == Match(answer="1")
    assert several.init == (Script("bash", "echo 1"), Script("python", "print(2)"))
    assert several.start == Script("bash", "sleep 9 &")
    assert several.check == (Script("bash", "exit 0"),)


def test_file_references_resolve_from_scripts_dir(tmp_path: Path) -> None:
    (tmp_path / "scripts" / "init").mkdir(parents=True)
    (tmp_path / "scripts" / "init" / "make.sh").write_text("echo made > /root/out")
    task = {
        "description": "d",
        "create": {"init": {"file": "init/make.sh"}},
        "evaluation": {
            "check": [{"file": "check/containing.py"}],
            "example": {"file": "example/0.sh"},
        },
    }
    resolved = parse_task(task, "t", tmp_path / "scripts")
    assert resolved.init == (Script("bash", "echo made > /root/out"),)
    assert resolved.check == (StandardCheck("containing"),)
    assert isinstance(resolved.example, MissingScript)
    assert resolved.example.reason.startswith(
        f"cannot read {tmp_path / 'scripts' / 'example/0.sh'}"
    )
    without = parse_task(task, "t", None)
    assert [missing.reference for missing in without.missing] == ["init/make.sh", "example/0.sh"]
    assert "needs scripts_dir=" in without.missing[0].reason


@pytest.mark.parametrize("reference", ["../../etc/passwd", "/etc/passwd", "link/passwd", "out"])
def test_file_references_cannot_leave_scripts_dir(tmp_path: Path, reference: str) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "link").symlink_to("/etc")
    (scripts / "out").symlink_to("/etc/passwd")
    reference = reference.replace("../../", "../" * len(scripts.parts))
    task = {"description": "d", "evaluation": {"check": {"file": reference}}}
    with pytest.raises(TaskFormatError, match=r"where-it-is: .* leads out of scripts_dir"):
        parse_task(task, "t", scripts, where="where-it-is")
    (scripts / "inside.sh").write_text("exit 0\n")
    (scripts / "alias.sh").symlink_to(scripts / "inside.sh")  # a link that stays inside
    assert parse_task(
        {"description": "d", "evaluation": {"check": {"file": "alias.sh"}}}, "t", scripts
    ).check == (Script("bash", "exit 0\n"),)


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ([], "a task must be a JSON object, got list"),
        ({"evaluation": {"match": "1"}}, "'description' must be a non-empty string"),
        ({"description": "d"}, "'evaluation' must be an object"),
        ({"description": "d", "evaluation": {}}, "'evaluation' needs 'match' or 'check'"),
        ({"description": "d", "evaluation": {"match": 3}}, "'evaluation.match' must be a string"),
        (
            {"description": "d", "evaluation": {"check": [None]}},
            "runs the example (null) but there is no 'example'",
        ),
        (
            {"description": "d", "evaluation": {"check": {"code": "x", "language": "c++"}}},
            "language 'c++'",
        ),
        (
            {"description": "d", "evaluation": {"check": {"language": "bash"}}},
            "needs 'code' or 'file'",
        ),
        (
            {"description": "d", "start": 5, "evaluation": {"match": "1"}},
            "start must be a string or a script object",
        ),
    ],
)
def test_malformed_tasks_are_clear_errors(task: object, message: str) -> None:
    with pytest.raises(
        TaskFormatError,
        match="where-it-is: .*"
        + message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+"),
    ):
        parse_task(task, "t", None, where="where-it-is")


def test_unreadable_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="task file not found"):
        load_tasks(tmp_path / "absent.json", "dev")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TaskFormatError, match="not valid JSON"):
        load_tasks(bad, "dev")


def test_records_and_dicts_load_from_a_list() -> None:
    tasks = load_tasks(
        [{"description": "d", "sample_id": "mine", "evaluation": {"match": "x"}}], "train"
    )
    assert tasks.by_sample_id("mine").match == Match(answer="x")


def test_agentbench_dev_file_loads_as_it_is(agentbench_data: Path) -> None:
    tasks = load_tasks(agentbench_data / "os_interaction" / "dev.json", "dev")
    assert len(tasks) == 26
    needing_scripts = {
        task.sample_id: [m.reference for m in task.missing] for task in tasks if task.missing
    }
    assert needing_scripts == {
        "dev-00003": ["check/0.sh", "example/0.sh"],
        "dev-00005": ["check/0.sh", "example/0.sh"],
        "dev-00025": ["init/stock-log.sh"],
    }
