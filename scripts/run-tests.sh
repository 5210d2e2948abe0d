#!/usr/bin/env bash
# Runs the whole test suite. Docker tests skip themselves (with the reason) when no daemon answers.
# pytest exit 5 ("no tests collected") is a failure here: a suite that ran nothing proved nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest -ra "$@"
rc=$?
if [ "$rc" = 5 ]; then
  echo "run-tests: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
