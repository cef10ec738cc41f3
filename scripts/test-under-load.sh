#!/usr/bin/env bash
# Runs the tests with every core kept busy by CPU hogs beside them, the way
# a shared CI runner or a busy laptop runs them: a test that leans on
# timing (a lease outlasting a delivery, a probe within its period) must
# pass there too. Prints one line a run and a table; exit status 1 when a
# run failed.
#
#   scripts/test-under-load.sh                         # ./..., 5 runs, one hog a core
#   RUNS=1 scripts/test-under-load.sh ./pkg/forwarder ./pkg/serve ./pkg/store/...
#   HOGS=4 RUNS=3 scripts/test-under-load.sh ./pkg/serve
#
# The hogs are busy loops of this shell's own (no tool to install), at
# the same priority as the tests, and are stopped at exit.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
# No second of sleep at each -race test binary's exit (see internal/testmain).
export GORACE="${GORACE:-atexit_sleep_ms=0}"
runs=${RUNS:-5}
hogs=${HOGS:-$(nproc)}
pkgs=("$@")
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(./...)
log=$(mktemp -d)
hog_pids=()
stop_hogs() { [[ ${#hog_pids[@]} -eq 0 ]] || kill "${hog_pids[@]}" 2>/dev/null || true; }
trap 'stop_hogs; rm -rf "$log"' EXIT
go test -race -count=1 -run '^$' "${pkgs[@]}" >/dev/null # build first, without the hogs
for _ in $(seq "$hogs"); do
  (while :; do :; done) &
  hog_pids+=($!)
done
echo "$hogs CPU hogs on $(nproc) cores; $runs runs of go test -race ${pkgs[*]}"
failed=0
rows=()
for run in $(seq "$runs"); do
  start=$(date +%s)
  if go test -race -count=1 -timeout 30m "${pkgs[@]}" >"$log/run$run" 2>&1; then
    result=pass
  else
    result=FAIL
    failed=$((failed + 1))
    grep -E '^(--- FAIL|FAIL|panic:)|_test.go:[0-9]+:' "$log/run$run" | head -n 40 || true
  fi
  took=$(($(date +%s) - start))
  echo "run $run: $result in ${took}s"
  rows+=("| $run | $result | ${took} s |")
done
echo
echo "| run (${hogs} hogs, $(nproc) cores) | result | wall time |"
echo "|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "$((runs - failed)) of $runs passed"
[[ $failed -eq 0 ]]
