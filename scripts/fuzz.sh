#!/usr/bin/env bash
# make fuzz: every parser's libFuzzer target (gateway-emulator/fuzz, wot-device/fuzz) for
# FUZZ_SECONDS each (300 unless set), one at a time. The committed seeds (<dir>/fuzz/corpus/<name>)
# are read, never written: what a run learns goes to <dir>/build/fuzz-corpus/<name> and is
# kept for the next run; a crash leaves its input in <dir>/build/fuzz-artifacts/<name>/ (add it
# to the seeds and to the unit test once the parser is fixed). make test runs each target for
# a few seconds (tests/c/test_parsers_inprocess.py).
#
#   fuzz.sh           build and run every target
#   fuzz.sh --list    the targets, one "DIR BINARY CORPUS" line each (read by the tests)
set -uo pipefail
cd "$(dirname "$0")/.."

TARGETS=(
  "gateway-emulator fuzz_trace trace"
  "gateway-emulator fuzz_http_response http_response"
  "gateway-emulator fuzz_sink_scan sink_scan"
  "wot-device fuzz_request request"
  "wot-device fuzz_fleet_coap fleet_coap"
  "wot-device fuzz_resources resources"
  "wot-device fuzz_conn_wire conn_wire"
  "wot-device fuzz_conn_file conn_file"
)
if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${TARGETS[@]}"
  exit 0
fi
each=${FUZZ_SECONDS:-300}
if ! command -v clang >/dev/null; then
  echo "fuzz: clang is not installed; as root: apt-get install --no-install-recommends clang libclang-rt-14-dev" >&2
  exit 1
fi
make --no-print-directory -C gateway-emulator fuzz-targets >/dev/null &&
  make --no-print-directory -C wot-device fuzz-targets >/dev/null || exit 1

failed=()
for t in "${TARGETS[@]}"; do
  read -r dir bin name <<<"$t"
  work=$dir/build/fuzz-corpus/$name
  art=$dir/build/fuzz-artifacts/$name
  mkdir -p "$work" "$art"
  log=$art.log
  echo "fuzz: $dir/build/$bin for ${each} s (log $log)"
  "$dir/build/$bin" -max_total_time="$each" -close_fd_mask=2 -print_final_stats=1 \
    -artifact_prefix="$art/" "$work" "$dir/fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  grep -E "^Done|average_exec_per_sec|new_units_added" "$log" | sed 's/^/  /'
  if [ "$rc" != 0 ]; then
    failed+=("$bin")
    grep -E "ERROR|SUMMARY|Test unit written" "$log" | sed 's/^/  /'
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]} (inputs under */build/fuzz-artifacts/)" >&2
  exit 1
fi
echo "fuzz: ${#TARGETS[@]} targets, ${each} s each, no finding"
