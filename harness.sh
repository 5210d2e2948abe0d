#!/usr/bin/env bash
# WoTbench test harness: one command from a config to an HTML report.
#   ./harness.sh configs/20dev.yaml [--backend docker|process]
# Installs what is missing, then hands over to `wotbench run`, which builds stale binaries, creates the
# environment, runs the test, removes everything it created and writes reports/<name>-<time>/.
# Exit codes: 0 valid run, 3 run flagged (GE bottleneck or contention), 2 bad input, 1 environment.
set -euo pipefail
cd "$(dirname "$0")"
if [ $# -lt 1 ]; then
  echo "usage: ./harness.sh CONFIG.yaml [--backend docker|process]" >&2
  exit 2
fi
config=$1; shift
if [ ! -f "$config" ]; then
  echo "harness: config file not found: $config" >&2
  exit 2
fi
bash scripts/bootstrap.sh   # apt packages and the venv; `wotbench run` rebuilds stale binaries
# exec: signals (Ctrl-C, SIGTERM) reach wotbench directly, which cleans up on every path.
exec .venv/bin/wotbench run "$config" "$@"
