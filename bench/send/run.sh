#!/usr/bin/env bash
# Benchmark `evfwd send` against a baseline that POSTs the same NDJSON lines
# unparsed, in batches of the same size, one request at a time, to the same
# null collection endpoint. Prints events/s, MB/s and peak RSS for both, and
# the ratio, and the CPU time each used; runs at 1M and 5M lines to show
# RSS stays flat.
#
#   bench/send/run.sh            # 1M and 5M lines
#   SIZES="100000" bench/send/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
SIZES=${SIZES:-"1000000 5000000"}
BATCH=${BATCH:-100}
work=$(mktemp -d)
trap 'kill $srv_pid 2>/dev/null || true; rm -rf "$work"' EXIT

go build -o "$work/evfwd" .
go build -o "$work/nullsrv" ./bench/send/nullsrv
go build -o "$work/baseline" ./bench/send/baseline
go build -o "$work/gen" ./bench/send/gen

"$work/nullsrv" >"$work/addr" &
srv_pid=$!
for _ in $(seq 50); do [ -s "$work/addr" ] && break; sleep 0.1; done
endpoint="http://$(cat "$work/addr")"

printf '%-9s %-9s %12s %9s %10s %8s %9s\n' lines run "events/s" "MB/s" "peak RSS" "CPU s" ratio
for n in $SIZES; do
	"$work/gen" -n "$n" >"$work/in.ndjson"
	bytes=$(stat -c %s "$work/in.ndjson")

	/usr/bin/time -f "%M %U %S" -o "$work/base.rss" "$work/baseline" -endpoint "$endpoint" -batch "$BATCH" <"$work/in.ndjson" >"$work/base.out"
	read -r _ base_secs _ <"$work/base.out"

	start=$(date +%s.%N)
	/usr/bin/time -f "%M %U %S" -o "$work/send.rss" "$work/evfwd" send "$work/in.ndjson" --write-key bench \
		--endpoint "$endpoint" --batch-size "$BATCH" -o json >"$work/send.json"
	end=$(date +%s.%N)
	send_secs=$(echo "$end - $start" | bc -l)
	grep -q "\"accepted\":$n," "$work/send.json" || { echo "send did not accept every line:"; cat "$work/send.json"; exit 1; }

	base_eps=$(echo "$n / $base_secs" | bc -l)
	send_eps=$(echo "$n / $send_secs" | bc -l)
	read -r base_rss base_user base_sys < <(tail -1 "$work/base.rss")
	read -r send_rss send_user send_sys < <(tail -1 "$work/send.rss")
	printf '%-9s %-9s %12.0f %9.1f %7.1f MB %8.2f %9s\n' "$n" baseline "$base_eps" "$(echo "$bytes / $base_secs / 1000000" | bc -l)" "$(echo "$base_rss / 1024" | bc -l)" "$(echo "$base_user + $base_sys" | bc -l)" ""
	printf '%-9s %-9s %12.0f %9.1f %7.1f MB %8.2f %8.2fx\n' "$n" "evfwd" "$send_eps" "$(echo "$bytes / $send_secs / 1000000" | bc -l)" "$(echo "$send_rss / 1024" | bc -l)" "$(echo "$send_user + $send_sys" | bc -l)" "$(echo "$send_eps / $base_eps" | bc -l)"
	rm -f "$work/in.ndjson"
done
