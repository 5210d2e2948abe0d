#!/usr/bin/env bash
# Runs the test suite. Docker tests skip themselves (with the reason) when no daemon answers.
# pytest exit 5 ("no tests collected") is a failure here: a suite that ran nothing proved nothing.
#
#   run-tests.sh [PYTEST ARGS]          one pytest run
#   run-tests.sh --suite [PYTEST ARGS]  make test: tests/unit two at a time (pytest-xdist, as
#                                       make check), then everything else one at a time (the C,
#                                       end-to-end and benchmark tests measure time); the tests
#                                       marked scale or long are left to make test-scale/test-long
set -uo pipefail
cd "$(dirname "$0")/.."

pytest_run() {
  .venv/bin/python -m pytest -ra "$@"
  local rc=$?
  if [ "$rc" = 5 ]; then
    echo "run-tests: pytest collected no tests ($*)" >&2
    return 1
  fi
  return "$rc"
}

if [ "${1:-}" = "--suite" ]; then
  shift
  # one half may select nothing (make test PYTEST_ARGS="-k ..."): only both empty is a failure
  .venv/bin/python -m pytest -ra tests/unit -n 2 -m "not scale and not long" "$@"; unit=$?
  .venv/bin/python -m pytest -ra tests/c tests/e2e tests/bench tests/cluster \
    -m "not scale and not long" "$@"; rest=$?
  if [ "$unit" = 5 ] && [ "$rest" = 5 ]; then
    echo "run-tests: pytest collected no tests" >&2
    exit 1
  fi
  [ "$unit" = 5 ] && unit=0
  [ "$rest" = 5 ] && rest=0
  [ "$unit" = 0 ] && [ "$rest" = 0 ] && exit 0
  echo "run-tests: tests/unit exited $unit, the C/end-to-end/bench tests $rest" >&2
  exit 1
fi
pytest_run "$@"
