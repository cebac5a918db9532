"""The bubblewrap sandbox's argv builders, checked without starting a sandbox: the base's
layout read from a small tree, the views and bwrap arguments built from it, the bash
assignments that hand them to the control loop (parsed back by a real bash), and the
launcher script (parsed by ``sh -n``)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from agentgym_eppo.environments.os import rootfs
from agentgym_eppo.environments.os.sandbox_bwrap import (
    JUDGE_PATH,
    KEPT_CAPABILITIES,
    BaseLayout,
    base_views,
    control_assignments,
    control_loop_script,
    control_values,
    idmapped,
    launch_argv,
    overlay_layers,
    read_base_layout,
)

ROOT = "/mnt/root"
VIEWS = [(Path("/base"), "/mnt/l0"), (Path("/usr"), "/mnt/lower1")]
HOST_LAYOUT = BaseLayout(
    source=Path("/"),
    top=(("usr", None), ("bin", "usr/bin"), ("lib", "usr/lib")),
    usr=(("bin", None), ("lib", None), ("lib64", "lib")),
    protected_etc=("ld.so.preload", "ld.so.cache", "python3.11"),
)
"""A merged-/usr host: /bin and /lib are links into /usr, which is the one overlay."""


@pytest.fixture
def full_root(tmp_path: Path) -> Path:
    """A small full root: /usr with two directories and a link, /bin a link, /lib a
    directory, and an /etc with ld.so.cache and two python3 directories."""
    for directory in ("usr/sbin", "usr/bin", "lib", "etc/python3.11", "etc/python3"):
        (tmp_path / directory).mkdir(parents=True)
    (tmp_path / "usr" / "lib64").symlink_to("lib")
    (tmp_path / "usr" / "notes.txt").write_text("a file: not a view")
    (tmp_path / "bin").symlink_to("usr/bin")
    (tmp_path / "etc" / "ld.so.cache").write_text("")
    return tmp_path


def test_read_base_layout_sorts_links_from_directories(full_root: Path) -> None:
    layout = read_base_layout(full_root, full_root / "etc")
    assert layout.top == (("usr", None), ("bin", "usr/bin"), ("lib", None))
    assert layout.usr == (("bin", None), ("lib64", "lib"), ("sbin", None))
    assert layout.directories == ("usr", "lib")
    # ld.so.preload always (the launcher creates it), alternatives only where it exists
    assert layout.protected_etc == ("ld.so.preload", "ld.so.cache", "python3", "python3.11")


def test_read_base_layout_reads_no_usr_entries_when_usr_is_a_link(tmp_path: Path) -> None:
    (tmp_path / "real-usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr").symlink_to("real-usr")
    layout = read_base_layout(tmp_path, tmp_path / "etc")
    assert layout.top == (("usr", "real-usr"),)
    assert layout.usr == ()
    assert layout.protected_etc == ("ld.so.preload",)


def test_overlay_layers_keep_each_host_directorys_place_in_its_name() -> None:
    layers = overlay_layers(Path("/base"), ["lib64", "usr"])
    assert layers == [
        ("", Path("/base"), "l0"),
        ("usr", Path("/usr"), "lower1"),
        ("lib64", Path("/lib64"), f"lower{rootfs.HOST_TOP_LEVEL.index('lib64') + 1}"),
    ]
    assert overlay_layers(Path("/base"), ()) == [("", Path("/base"), "l0")]


def test_idmapped_finds_the_layer_holding_a_path() -> None:
    assert idmapped(Path("/usr"), VIEWS) == "/mnt/lower1"
    assert idmapped(Path("/usr/lib/x86_64"), VIEWS) == "/mnt/lower1/lib/x86_64"
    assert idmapped(Path("/base/etc"), VIEWS) == "/mnt/l0/etc"
    with pytest.raises(ValueError, match="in no layer"):
        idmapped(Path("/usrx"), VIEWS)  # a shared prefix is not a parent


def test_base_views_mount_each_directory_from_its_view_and_remake_each_link() -> None:
    views = base_views(HOST_LAYOUT, VIEWS)
    assert views.whole == [
        "--ro-bind", "/mnt/lower1", "/usr",
        "--symlink", "usr/bin", "/bin",
        "--symlink", "usr/lib", "/lib",
    ]  # fmt: skip
    assert views.dirs == []  # /usr is mounted by its parts or whole, never here
    assert views.usr == ["--ro-bind", "/mnt/lower1", "/usr"]
    assert views.usr_dirs == [
        "--ro-bind", "/mnt/lower1/bin", "/usr/bin",
        "--ro-bind", "/mnt/lower1/lib", "/usr/lib",
    ]  # fmt: skip
    assert views.usr_names == ["bin", "lib"]
    assert views.usr_links == ["lib64", "lib"]
    assert views.links == ["bin", "usr/bin", "lib", "usr/lib"]


def test_base_views_of_a_full_root_show_its_other_directories(full_root: Path) -> None:
    layout = read_base_layout(full_root, full_root / "etc")
    views = base_views(layout, [(full_root, "/mnt/l0")])
    assert views.dirs == ["--ro-bind", "/mnt/l0/lib", "/lib"]
    assert views.usr_dirs == [
        "--ro-bind", "/mnt/l0/usr/bin", "/usr/bin",
        "--ro-bind", "/mnt/l0/usr/sbin", "/usr/sbin",
    ]  # fmt: skip


def _values(pin_base_dirs: bool) -> dict[str, str | list[str]]:
    return control_values(
        ROOT,
        HOST_LAYOUT,
        VIEWS,
        pin_base_dirs=pin_base_dirs,
        scratch="/mnt/judge/scratch",
        seccomp="/cache/seccomp.bpf",
    )


def _list(value: str | list[str]) -> list[str]:
    assert isinstance(value, list)
    return value


def test_the_agents_bwrap_pins_etc_protects_the_loaders_files_and_drops_capabilities() -> None:
    agent = _list(_values(pin_base_dirs=False)["AGENT"])
    assert agent[:4] == ["bwrap", "--pidns", "9", "--unshare-cgroup-try"]
    assert agent[4:10] == ["--bind", ROOT, "/", "--bind", f"{ROOT}/etc", "/etc"]
    for name in HOST_LAYOUT.protected_etc:
        assert f"{ROOT}/etc/{name}" in agent
        index = agent.index(f"{ROOT}/etc/{name}")
        assert agent[index - 1 : index + 2] == ["--ro-bind", f"{ROOT}/etc/{name}", f"/etc/{name}"]
    dropped = agent.index("--cap-drop")
    assert agent[dropped + 1] == "ALL"
    added = [agent[i + 1] for i, word in enumerate(agent) if word == "--cap-add"]
    assert added == list(KEPT_CAPABILITIES)
    assert not {"CAP_MKNOD", "CAP_NET_RAW", "CAP_SYS_ADMIN"} & set(added)
    assert agent[agent.index("--seccomp") + 1] == "10"
    assert agent[agent.index("/proc/sys") - 1 : agent.index("/proc/sys") + 2] == [
        "--ro-bind", "/proc/sys", "/proc/sys",
    ]  # fmt: skip


def test_a_full_root_pins_its_top_level_directories_too() -> None:
    host = _list(_values(pin_base_dirs=False)["AGENT"])
    full = _list(_values(pin_base_dirs=True)["AGENT"])
    assert full[4:13] == [
        "--bind", ROOT, "/",
        "--bind", f"{ROOT}/etc", "/etc",
        "--bind", f"{ROOT}/usr", "/usr",  # the layout's one directory; its links stay links
    ]  # fmt: skip
    assert full[:4] + full[13:] == host[:4] + host[10:]


def test_the_judge_runs_with_the_bases_programs_first_and_the_holder_owns_the_namespaces() -> None:
    values = _values(pin_base_dirs=False)
    assert values["JUDGE"] == ["bwrap", "--pidns", "9", "--unshare-cgroup-try"]
    protect = _list(values["PROTECT"])
    assert protect[-3:] == ["--setenv", "PATH", JUDGE_PATH]
    assert JUDGE_PATH.split(":")[0] == "/usr/sbin"
    holder = _list(values["HOLDER"])
    assert holder[0] == "bwrap" and holder[1:10] == base_views(HOST_LAYOUT, VIEWS).whole
    for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"):
        assert flag in holder
    assert "--bind" not in holder  # the holder sees the base only, read-only
    assert (values["ROOT"], values["SCRATCH"], values["SECCOMP"]) == (
        ROOT,
        "/mnt/judge/scratch",
        "/cache/seccomp.bpf",
    )


def test_control_assignments_reach_bash_word_for_word() -> None:
    values: dict[str, str | list[str]] = {
        "ROOT": "/mnt/a root",
        "ARGS": ["--bind", "/with space", "/it's", "$HOME", "*", ""],
        "EMPTY": [],
    }
    script = control_assignments(values)
    script += 'printf "%s\\0" "$ROOT" "${#ARGS[@]}" "${ARGS[@]}" "${#EMPTY[@]}"\n'
    output = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", script],
        capture_output=True,
        check=True,
        cwd="/",
    ).stdout
    words = output.decode().split("\0")[:-1]
    assert words == ["/mnt/a root", "6", "--bind", "/with space", "/it's", "$HOME", "*", "", "0"]


def test_the_control_loop_is_package_data_that_bash_parses() -> None:
    script = control_loop_script()
    assert script.startswith("# shellcheck shell=bash\n")
    for name in _values(pin_base_dirs=False):  # the loop reads every value it is given
        assert re.search(rf"\$\{{?{name}\b", script), name
    subprocess.run(["bash", "-n", "-c", script], check=True)


def test_the_launcher_mounts_the_overlays_by_relative_names_then_runs_the_loop() -> None:
    overlays = overlay_layers(Path("/base"), ["usr"])
    control = ["bash", "--noprofile", "--norc", "-c", "echo loop", "control", "1024"]
    argv = launch_argv(
        mnt="/var/mnt",
        overlays=overlays,
        procs_files=["/sys/fs/cgroup/a/cgroup.procs", Path("/sys/fs/cgroup/b/cgroup.procs")],
        disk_bytes=1 << 20,
        idmap_helper=["python3", "-I", "-S", "/pkg/idmap.py"],
        control=control,
    )
    assert argv[:7] == ["unshare", "--mount", "--propagation", "private", "sh", "-c", argv[6]]
    lines = argv[6].split("\n")
    assert lines[:3] == [
        "set -e",
        "echo $$ > /sys/fs/cgroup/a/cgroup.procs",
        "echo $$ > /sys/fs/cgroup/b/cgroup.procs",
    ]
    assert "mount -t tmpfs -o size=1048576,mode=755 agentgym-os /var/mnt" in lines
    assert "USERNS=$(python3 -I -S /pkg/idmap.py /base l0 /usr lower1)" in lines
    mounts = [line for line in lines if line.startswith("mount -t overlay")]
    assert mounts == [
        "mount -t overlay overlay -o lowerdir=l0,upperdir=upper0,workdir=work0 root",
        "mount -t overlay overlay -o lowerdir=lower1,upperdir=upper1,workdir=work1 root/usr",
    ]
    assert lines[-1] == "exec " + shlex.join(control) + ' "$USERNS"'
    subprocess.run(["sh", "-n", "-c", argv[6]], check=True)
