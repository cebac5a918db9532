#!/usr/bin/env bash
# Runs the whole test suite with the project's virtual environment.
#
# The OS environment's Docker tests need an engine and the offline base image: when
# dockerd is installed but not running, this script starts it (and stops it at the end),
# then builds `local-os/default` with scripts/build_os_image.sh unless it exists (cached).
# Where Docker cannot run at all, those tests skip with the reason.
#
# Every run ends with pytest's "skip summary" section (tests/conftest.py): each skip
# reason, how many tests it skipped, and whether CI allows it. With CI=true (.ci/run sets
# it) a skip whose reason is not on CI_ALLOWED_SKIPS fails the run, naming what is
# missing (a server that is down, Docker, bubblewrap, the AgentBench task files...).
#
# pytest's exit code 5 ("no tests collected") is a failure here: a run that tests
# nothing must not pass.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}

dockerd_pid=
stop_dockerd() {
    if [ -n "$dockerd_pid" ]; then
        kill "$dockerd_pid" 2>/dev/null
        wait "$dockerd_pid" 2>/dev/null
        echo "stopped the dockerd this run started"
    fi
}
trap stop_dockerd EXIT

if command -v dockerd >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ] && ! docker info >/dev/null 2>&1; then
    log=${TMPDIR:-/tmp}/agentgym-eppo-dockerd.log
    dockerd >"$log" 2>&1 &
    dockerd_pid=$!
    for _ in $(seq 60); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$dockerd_pid" 2>/dev/null || break
        sleep 0.5
    done
    if docker info >/dev/null 2>&1; then
        echo "started dockerd (pid $dockerd_pid)"
    else
        echo "dockerd did not start (see $log): the Docker tests will skip" >&2
        tail -5 "$log" >&2
        dockerd_pid=
    fi
fi
if docker info >/dev/null 2>&1; then
    bash scripts/build_os_image.sh || echo "building the OS base image failed: the Docker tests will skip" >&2
fi

if [ "${CI:-}" = true ]; then
    echo "CI=true: a skip not on CI_ALLOWED_SKIPS (tests/conftest.py) fails this run"
fi
# a crash of the interpreter (also at exit, after the summary) prints every thread's stack
export PYTHONFAULTHANDLER=1
"$VENV/bin/python" -m pytest "$@"
status=$?
if [ "$status" -eq 5 ]; then
    echo "no tests were collected: failing the run" >&2
    exit 1
fi
exit "$status"
