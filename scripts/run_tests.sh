#!/usr/bin/env bash
# Runs the whole test suite with the project's virtual environment.
# pytest's exit code 5 ("no tests collected") is a failure here: a run that tests
# nothing must not pass.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
"$VENV/bin/python" -m pytest "$@"
status=$?
if [ "$status" -eq 5 ]; then
    echo "no tests were collected: failing the run" >&2
    exit 1
fi
exit "$status"
