"""Generator of the project's own OS tasks (shipped under ``assets/os/``).

Self-Instruct-style templates over the families AgentBench's OS tasks cover: file search
and counting, text processing, permissions and users, processes and background jobs,
archives, disk usage, and scripting. Each task is an AgentBench-format object with an
``init`` that builds its files, an ``evaluation`` (a standard checker against the
example's output, or a bash check of the final state for operation tasks) and an
``example`` solution that the expert runs. Same seed, same bytes::

    python -m agentgym_eppo.environments.os.generator   # rewrites assets/os/*.jsonl.gz
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from agentgym_eppo.core import asset_path, write_jsonl_gz

SPLIT_SIZES = {"train": 600, "dev": 100, "test": 100}
SEEDS = {"train": 1, "dev": 2, "test": 3}

WORDS = (
    "alpha", "bravo", "cedar", "delta", "ember", "falcon", "garnet", "harbor", "indigo",
    "juniper", "kernel", "lumen", "meadow", "nebula", "orbit", "pixel", "quartz", "raven",
    "summit", "tundra", "umber", "vertex", "willow", "xenon", "yonder", "zephyr",
)  # fmt: skip
EXTENSIONS = ("txt", "log", "csv", "md", "py", "json", "conf", "dat")
NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy")
INTEGER = {"language": "python", "file": "check/integer-match.py"}
STRING = {"language": "python", "file": "check/string-match.py"}

Task = dict[str, Any]


def _answer_task(
    description: str, init: str, example: str, checker: dict[str, str], labels: list[str]
) -> Task:
    return {
        "description": description,
        "create": {"local": "default", "init": {"code": init}},
        "evaluation": {"check": [None, checker], "example": {"code": example}},
        "labels": labels,
    }


def _operation_task(
    description: str,
    init: str,
    example: str,
    check: str,
    labels: list[str],
    start: str | None = None,
) -> Task:
    task: Task = {
        "description": description,
        "create": {"local": "default", "init": {"code": init}},
        "evaluation": {
            "check": [{"language": "bash", "code": check}],
            "example": {"code": example},
        },
        "labels": labels,
    }
    if start is not None:
        task["start"] = start
    return task


def _tree(rng: random.Random, root: str, count: int) -> tuple[str, list[str]]:
    """Init lines creating ``count`` small files under ``root`` in up to three subfolders."""
    subdirs = ["", *rng.sample(WORDS, 3)]
    lines = [f"mkdir -p {root}/{sub}" for sub in subdirs if sub]
    lines.insert(0, f"mkdir -p {root}")
    paths = []
    for index in range(count):
        sub = rng.choice(subdirs)
        name = f"{rng.choice(WORDS)}{index}.{rng.choice(EXTENSIONS)}"
        path = f"{root}/{sub}/{name}" if sub else f"{root}/{name}"
        paths.append(path)
        lines.append(f"echo {rng.choice(WORDS)} > {path}")
    return "\n".join(lines), paths


def _decoy_rng(*parameters: object) -> random.Random:
    """The generator of a task's decoys, seeded by the task's own parameters: drawing them
    leaves the split's stream as it was, so every task of the other templates keeps its
    bytes."""
    return random.Random(repr(parameters))


def count_extension(rng: random.Random) -> Task:
    root = f"/root/{rng.choice(WORDS)}_data"
    init, paths = _tree(rng, root, rng.randint(6, 18))
    ext = rng.choice([path.rsplit(".", 1)[1] for path in paths])
    return _answer_task(
        f"How many files with the extension .{ext} are there in {root} and its subdirectories?",
        init,
        f"find {root} -type f -name '*.{ext}' | wc -l",
        INTEGER,
        ["file", "search"],
    )


def count_lines_with_word(rng: random.Random) -> Task:
    path = f"/var/log/{rng.choice(WORDS)}.log"
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(3, 7))) for _ in range(rng.randint(10, 30))]
    word = rng.choice(rng.choice(lines).split())
    body = "\\n".join(lines)
    return _answer_task(
        f"How many lines of {path} contain the word '{word}'?",
        f"mkdir -p /var/log\nprintf '{body}\\n' > {path}",
        f"grep -cw {word} {path}",
        INTEGER,
        ["text"],
    )


def largest_file(rng: random.Random) -> Task:
    root = f"/home/{rng.choice(NAMES)}/files"
    sizes = rng.sample(range(100, 9000), rng.randint(4, 9))
    names = rng.sample(WORDS, len(sizes))
    init = [f"mkdir -p {root}"] + [
        f"head -c {size} /dev/zero > {root}/{name}.bin"
        for size, name in zip(sizes, names, strict=False)
    ]
    return _answer_task(
        f"Which file in {root} is the largest? Answer with its file name only.",
        "\n".join(init),
        f"ls -S {root} | head -n 1",
        STRING,
        ["file", "disk"],
    )


def column_sum(rng: random.Random) -> Task:
    path = f"/root/{rng.choice(WORDS)}_sales.csv"
    rows = [f"{rng.choice(NAMES)},{rng.randint(1, 500)}" for _ in range(rng.randint(5, 20))]
    body = "\\n".join(["name,amount", *rows])
    return _answer_task(
        f"{path} is a CSV file with a header line. What is the sum of its 'amount' column?",
        f"printf '{body}\\n' > {path}",
        f"tail -n +2 {path} | awk -F, '{{s += $2}} END {{print s}}'",
        INTEGER,
        ["text"],
    )


def distinct_values(rng: random.Random) -> Task:
    path = f"/srv/{rng.choice(WORDS)}.txt"
    values = [rng.choice(NAMES) for _ in range(rng.randint(8, 25))]
    body = "\\n".join(values)
    return _answer_task(
        f"How many distinct names are listed in {path} (one name per line)?",
        f"mkdir -p /srv\nprintf '{body}\\n' > {path}",
        f"sort -u {path} | wc -l",
        INTEGER,
        ["text"],
    )


def most_frequent_ip(rng: random.Random) -> Task:
    path = "/var/log/access.log"
    addresses = [f"10.0.{rng.randint(0, 9)}.{rng.randint(1, 254)}" for _ in range(4)]
    counts = rng.sample(range(2, 12), len(addresses))
    lines = []
    for address, count in zip(addresses, counts, strict=False):
        lines += [f"{address} GET /{rng.choice(WORDS)} 200" for _ in range(count)]
    rng.shuffle(lines)
    body = "\\n".join(lines)
    return _answer_task(
        f"Which IP address made the most requests in {path}? The address is the first field of each line.",
        f"mkdir -p /var/log\nprintf '{body}\\n' > {path}",
        f"awk '{{print $1}}' {path} | sort | uniq -c | sort -rn | head -n 1 | awk '{{print $2}}'",
        STRING,
        ["text", "log"],
    )


def newest_file(rng: random.Random) -> Task:
    root = f"/opt/{rng.choice(WORDS)}"
    names = rng.sample(WORDS, rng.randint(3, 7))
    days = rng.sample(range(1, 60), len(names))
    init = [f"mkdir -p {root}"] + [
        f"touch -d '{day} days ago' {root}/{name}.txt"
        for name, day in zip(names, days, strict=False)
    ]
    return _answer_task(
        f"Which file in {root} was modified most recently? Answer with its file name only.",
        "\n".join(init),
        f"ls -t {root} | head -n 1",
        STRING,
        ["file"],
    )


def count_empty_or_hidden(rng: random.Random) -> Task:
    root = f"/root/{rng.choice(WORDS)}"
    hidden = rng.random() < 0.5
    init = [f"mkdir -p {root}"]
    for index in range(rng.randint(5, 14)):
        name = (
            f".{rng.choice(WORDS)}{index}" if rng.random() < 0.4 else f"{rng.choice(WORDS)}{index}"
        )
        if rng.random() < 0.4:
            init.append(f"touch {root}/{name}")
        else:
            init.append(f"echo data > {root}/{name}")
    if hidden:
        question = f"How many hidden files are directly in {root}?"
        example = f"find {root} -maxdepth 1 -type f -name '.*' | wc -l"
    else:
        question = f"How many empty files are directly in {root}?"
        example = f"find {root} -maxdepth 1 -type f -empty | wc -l"
    return _answer_task(question, "\n".join(init), example, INTEGER, ["file", "search"])


def directory_bytes(rng: random.Random) -> Task:
    root = f"/data/{rng.choice(WORDS)}"
    init = [f"mkdir -p {root}"] + [
        f"head -c {rng.randint(10, 5000)} /dev/zero > {root}/part{index}"
        for index in range(rng.randint(2, 8))
    ]
    return _answer_task(
        f"What is the total size in bytes of the regular files directly in {root}?",
        "\n".join(init),
        f"find {root} -maxdepth 1 -type f -printf '%s\\n' | awk '{{s += $1}} END {{print s}}'",
        INTEGER,
        ["disk"],
    )


def archive_count(rng: random.Random) -> Task:
    name = rng.choice(WORDS)
    init, _ = _tree(rng, f"/tmp/{name}", rng.randint(3, 12))
    init += f"\ncd /tmp && tar -czf /root/{name}.tar.gz {name} && rm -rf /tmp/{name}"
    return _answer_task(
        f"How many regular files does the archive /root/{name}.tar.gz contain?",
        init,
        f"tar -tzvf /root/{name}.tar.gz | grep -c '^-'",
        INTEGER,
        ["archive"],
    )


ARCHIVE_CHECK = r"""list=$(tar -tzf /root/{name}.tar.gz) || exit 1
for member in {members}; do
    printf '%s\n' "$list" | grep -qxF "$member" || exit 1
done
printf '%s\n' "$list" | grep -qv '^{name}/' && exit 1
while IFS= read -r -d '' file; do
    [ "$file" = /root/{name}.tar.gz ] && continue
    tar -tf "$file" 2> /dev/null | grep -Eq '^(\./)?(root/)?({decoys})(/|$)' && exit 1
done < <(find /root /home /tmp /srv /opt /data /var /mnt -type f \( -name '*.tar' \
    -o -name '*.tar.*' -o -name '*.t[abgx]z' -o -name '*.tbz2' \) -print0 2> /dev/null)
exit 0"""
"""The check of :func:`make_archive`: every file of the named directory in its archive and
nothing else there, and no tar archive in the places files are kept (by its name, however
compressed) holding a decoy directory, whatever its path inside (``bravo/``, ``./bravo/``,
``root/bravo/``)."""


def make_archive(rng: random.Random) -> Task:
    """The named directory among two or three look-alike decoys: the check wants it alone
    in the archive and no decoy archived anywhere, so "archive every directory" fails."""
    name = rng.choice(WORDS)
    init, paths = _tree(rng, f"/root/{name}", rng.randint(2, 6))
    decoy_rng = _decoy_rng(init)
    decoys = decoy_rng.sample([word for word in WORDS if word != name], decoy_rng.randint(2, 3))
    blocks = [init] + [
        _tree(decoy_rng, f"/root/{decoy}", decoy_rng.randint(2, 6))[0] for decoy in decoys
    ]
    decoy_rng.shuffle(blocks)  # no creation order tells the named directory apart
    members = " ".join(path.removeprefix("/root/") for path in paths)
    check = ARCHIVE_CHECK.format(name=name, members=members, decoys="|".join(decoys))
    return _operation_task(
        f"Create a gzip-compressed tar archive /root/{name}.tar.gz of the directory /root/{name} "
        f"(paths inside the archive should start with {name}/). Archive nothing else: the "
        f"archive holds only that directory, and the other directories of /root stay unarchived.",
        "\n".join(blocks),
        f"cd /root && tar -czf {name}.tar.gz {name}",
        check,
        ["archive"],
    )


def set_permissions(rng: random.Random) -> Task:
    """The named file among look-alike decoys (mode 666 too) that must keep their mode,
    so "chmod every file" fails."""
    path = f"/root/{rng.choice(WORDS)}.{rng.choice(EXTENSIONS)}"
    mode = rng.choice(["600", "640", "644", "700", "750", "400"])
    decoy_rng = _decoy_rng(path, mode)
    decoys: list[str] = []
    for _ in range(decoy_rng.randint(2, 3)):
        decoy = f"/root/{decoy_rng.choice(WORDS)}.{decoy_rng.choice(EXTENSIONS)}"
        if decoy not in (path, *decoys):
            decoys.append(decoy)
    files = [path, *decoys]
    decoy_rng.shuffle(files)
    return _operation_task(
        f"Change the permissions of {path} to mode {mode} (octal), leaving the other files "
        "of /root as they are.",
        "\n".join(f"echo secret > {file}\nchmod 666 {file}" for file in files),
        f"chmod {mode} {path}",
        f'[ "$(stat -c %a {path})" = {mode} ] || exit 1\n'
        f"for file in {' '.join(decoys)}; do\n"
        '    [ "$(stat -c %a "$file")" = 666 ] || exit 1\n'
        "done",
        ["permission"],
    )


def add_user(rng: random.Random) -> Task:
    """The check also wants no other user (ids 1000 and up) and no other home: creating
    every name the template could draw fails."""
    user = f"{rng.choice(NAMES)}{rng.randint(1, 99)}"
    group = rng.choice(["staff", "users", "adm", "audio", "video"])
    return _operation_task(
        f"Create a user named {user} with a home directory /home/{user} who is also a member "
        f"of the group {group}. Create no other user.",
        "true",
        f"useradd -m -G {group} {user}",
        f"id -nG {user} | tr ' ' '\\n' | grep -qx {group} && [ -d /home/{user} ] "
        f"&& [ \"$(awk -F: '$3 >= 1000 && $3 < 65534 {{print $1}}' /etc/passwd)\" = {user} ] "
        f'&& [ "$(ls -A /home)" = {user} ]',
        ["user"],
    )


def count_bash_users(rng: random.Random) -> Task:
    users = [f"{name}{rng.randint(1, 99)}" for name in rng.sample(NAMES, rng.randint(1, 5))]
    init = [
        f"useradd -m -s {'/bin/bash' if rng.random() < 0.6 else '/bin/sh'} {user}" for user in users
    ]
    return _answer_task(
        "How many users on this system have /bin/bash as their login shell?",
        "\n".join(init),
        "grep -c ':/bin/bash$' /etc/passwd",
        INTEGER,
        ["user"],
    )


def file_owner(rng: random.Random) -> Task:
    users = rng.sample(NAMES, 3)
    owner = rng.choice(users)
    path = f"/srv/{rng.choice(WORDS)}.dat"
    init = [f"useradd {user}" for user in users] + [
        "mkdir -p /srv",
        f"echo x > {path}",
        f"chown {owner} {path}",
    ]
    return _answer_task(
        f"Which user owns the file {path}? Answer with the user name only.",
        "\n".join(init),
        f"stat -c %U {path}",
        STRING,
        ["user", "permission"],
    )


def _wait_until(condition: str, tries: int = 100) -> str:
    """Shell that polls ``condition`` every 0.1 s, at most ``tries`` times: started processes
    are running when the task begins however loaded the machine (a fixed sleep raced them)."""
    return f"for i in $(seq {tries}); do {condition} > /dev/null && break; sleep 0.1; done"


def count_processes(rng: random.Random) -> Task:
    name = f"{rng.choice(WORDS)}-job{rng.randint(1, 99)}"  # <= 15 characters: a full comm
    count = rng.randint(1, 5)
    start = (
        f"cp /bin/sleep /tmp/{name}; for i in $(seq {count}); do /tmp/{name} 1000 & done; "
        + _wait_until(f'[ "$(pgrep -xc {name})" -ge {count} ]')
    )
    task = _answer_task(
        f"How many processes named {name} are running?",
        "true",
        f"pgrep -xc {name}",
        INTEGER,
        ["process", "background"],
    )
    task["start"] = start
    return task


STOP_CHECK = r"""alive() {{ ps -o stat= -C "$1" | grep -qv '^Z'; }}
alive {name} && exit 1
for decoy in {decoys}; do
    alive "$decoy" || exit 1
done
exit 0"""
"""The check of :func:`stop_process`: no live process (a zombie is a dead one) named
``name``, and one of each decoy."""


def stop_process(rng: random.Random) -> Task:
    """The named process among two or three look-alike decoys that must stay up, so
    "kill every process" fails."""
    name = f"{rng.choice(WORDS)}-srv{rng.randint(1, 99)}"  # <= 15 characters: a full comm
    decoy_rng = _decoy_rng(name)
    decoys: list[str] = []
    for _ in range(decoy_rng.randint(2, 3)):
        decoy = f"{decoy_rng.choice(WORDS)}-srv{decoy_rng.randint(1, 99)}"
        if decoy not in (name, *decoys):
            decoys.append(decoy)
    names = [name, *decoys]
    decoy_rng.shuffle(names)  # no start order tells the named process apart
    start = (
        "; ".join(f"cp /bin/sleep /tmp/{each}" for each in names)
        + "; "
        + " ".join(f"/tmp/{each} 1000 &" for each in names)
        + " "
        + _wait_until(f"[ \"$(pgrep -xc '{'|'.join(names)}')\" -ge {len(names)} ]")
    )
    return _operation_task(
        f"A process named {name} is running in the background, beside other background "
        "processes. Stop it and leave the others running.",
        "true",
        f"pkill -x {name}; sleep 0.2",
        STOP_CHECK.format(name=name, decoys=" ".join(decoys)),
        ["process", "background"],
        start=start,
    )


def write_script(rng: random.Random) -> Task:
    name = f"{rng.choice(WORDS)}{rng.randint(1, 9)}"
    operation, symbol = rng.choice([("sum", "+"), ("product", "*"), ("difference", "-")])
    left, right = rng.randint(2, 50), rng.randint(2, 50)
    expected = eval(f"{left} {symbol} {right}")
    script = f"#!/bin/bash\\necho $(( $1 {symbol} $2 ))"
    return _operation_task(
        f"Write an executable script /usr/local/bin/{name} that prints the {operation} of its two "
        f"integer arguments (first {'minus second' if symbol == '-' else 'and second'}), e.g. "
        f"`{name} 3 2`.",
        "true",
        f"printf '{script}\\n' > /usr/local/bin/{name} && chmod +x /usr/local/bin/{name}",
        f'[ "$({name} {left} {right})" = "{expected}" ]',
        ["scripting"],
    )


def replace_text(rng: random.Random) -> Task:
    """The check wants the whole file as the replacement leaves it: emptying the file, or
    rewriting it from what it holds, fails."""
    old, new = rng.sample(WORDS, 2)
    path = f"/etc/{rng.choice(WORDS)}.conf"
    lines = [
        f"{rng.choice(WORDS)}={rng.choice([old, *rng.sample(WORDS, 2)])}"
        for _ in range(rng.randint(4, 9))
    ]
    lines.append(f"name={old}")
    body = "\\n".join(lines)
    expected = "\\n".join(line.replace(old, new) for line in lines)  # no word holds another
    return _operation_task(
        f"Replace every occurrence of the word '{old}' with '{new}' in {path}.",
        f"printf '{body}\\n' > {path}",
        f"sed -i 's/{old}/{new}/g' {path}",
        f"printf '{expected}\\n' | cmp -s - {path}",
        ["text"],
    )


TEMPLATES: tuple[Callable[[random.Random], Task], ...] = (
    count_extension, count_lines_with_word, largest_file, column_sum, distinct_values,
    most_frequent_ip, newest_file, count_empty_or_hidden, directory_bytes, archive_count,
    make_archive, set_permissions, add_user, count_bash_users, file_owner, count_processes,
    stop_process, write_script, replace_text,
)  # fmt: skip


def generate_all() -> dict[str, list[Task]]:
    """Every split; test and dev first, and no task the agent sees (description, init,
    start) appears twice."""
    seen: set[str] = set()
    splits = {split: _generate(split, seen) for split in ("test", "dev", "train")}
    return {split: splits[split] for split in SPLIT_SIZES}


def generate_split(split: str) -> list[Task]:
    """The shipped ``split`` (see :func:`generate_all`)."""
    return generate_all()[split]


def _generate(split: str, seen: set[str]) -> list[Task]:
    """The split's tasks: templates in turn, parameters from the split's seed."""
    rng = random.Random(SEEDS[split])
    tasks: list[Task] = []
    while len(tasks) < SPLIT_SIZES[split]:
        template = TEMPLATES[len(tasks) % len(TEMPLATES)]
        task = template(rng)
        key = json.dumps([task["description"], task["create"], task.get("start")])
        if key in seen:
            continue
        seen.add(key)
        task["sample_id"] = f"os-{split}-{len(tasks):04d}"
        tasks.append(task)
    return tasks


def main() -> None:
    for split, tasks in generate_all().items():
        path = asset_path("os", f"{split}.jsonl.gz")
        write_jsonl_gz(path, tasks)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
