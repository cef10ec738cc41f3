#!/usr/bin/env bash
# Whole-process benchmark of `evfwd trigger` load mode: COUNT signed
# deliveries at CONCURRENCY into a local null receiver (keep-alive, answers
# 200, verifies X-Signature), RUNS times. Prints a table.
#
#   bench/trigger/run.sh                 # 200000 x 64, 3 runs
#   COUNT=50000 CONCURRENCY=32 RUNS=1 bench/trigger/run.sh
set -euo pipefail

COUNT=${COUNT:-200000}
CONCURRENCY=${CONCURRENCY:-64}
RUNS=${RUNS:-3}
TYPE=${TYPE:-track}
SECRET=bench-secret

root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
recv_pid=
cleanup() {
	[ -n "$recv_pid" ] && kill "$recv_pid" 2>/dev/null && wait "$recv_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

(cd "$root" && go build -o "$tmp/evfwd" . && go build -o "$tmp/nullrecv" ./bench/trigger/nullrecv)

"$tmp/nullrecv" -secret "$SECRET" >"$tmp/url" 2>"$tmp/recv.log" &
recv_pid=$!
for _ in $(seq 50); do [ -s "$tmp/url" ] && break; sleep 0.1; done
url=$(cat "$tmp/url")

echo "evfwd trigger $TYPE --count $COUNT --concurrency $CONCURRENCY -> $url (signed, keep-alive)"
echo "$(nproc) CPUs, $(go version | cut -d' ' -f3)"
echo
printf '| run | deliveries/s | elapsed | p50 | p90 | p99 | max | delivered | failed |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for run in $(seq "$RUNS"); do
	"$tmp/evfwd" trigger "$TYPE" --url "$url" --secret-file <(printf %s "$SECRET") \
		--count "$COUNT" --concurrency "$CONCURRENCY" >"$tmp/out.txt" || true
	# Text mode is what is measured: -o json would add one record per attempt.
	python3 - "$run" "$tmp/out.txt" <<'PY'
import re, sys
run, text = sys.argv[1], open(sys.argv[2]).read()
rate, elapsed = re.search(r"in (\S+): (\d+) deliveries/s", text).group(2, 1)
ok, failed = re.search(r"delivered (\d+)\s+failed (\d+)", text).groups()
lat = dict(re.findall(r"(p50|p90|p99|max) (\S+)", text))
print(f"| {run} | {int(rate):,} | {elapsed} | {lat['p50']} | {lat['p90']} | {lat['p99']} | {lat['max']} | {ok} | {failed} |")
PY
done
kill "$recv_pid" && wait "$recv_pid" 2>/dev/null || true
recv_pid=
echo
echo "receiver: $(cat "$tmp/recv.log")"
