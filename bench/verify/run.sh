#!/usr/bin/env bash
# Whole-process benchmark of `evfwd verify --record`: for each signature
# scheme, `evfwd trigger --scheme S` sends COUNT signed webhooks into
# `evfwd listen --record`, then `evfwd verify --record --scheme S` re-checks
# the file, best of RUNS. Prints a table of records/s; exits 1 unless every
# record verifies.
#
#   bench/verify/run.sh                    # 100000 per scheme, best of 3
#   COUNT=10000 RUNS=1 bench/verify/run.sh
set -euo pipefail

COUNT=${COUNT:-100000}
RUNS=${RUNS:-3}
SCHEMES=${SCHEMES:-segment github stripe standard slack shopify}
SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw # a Standard Webhooks secret, usable by every scheme

root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
listen_pid=
cleanup() {
	[ -n "$listen_pid" ] && kill "$listen_pid" 2>/dev/null && wait "$listen_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
(cd "$root" && go build -o "$tmp/evfwd" .)
ev="$tmp/evfwd"

echo "evfwd verify --record over $COUNT requests recorded by evfwd listen, per scheme; best of $RUNS"
echo "$(nproc) CPUs, $(go version | cut -d' ' -f3)"
echo
printf '| scheme | records | file | seconds | records/s | valid |\n'
printf '|---|---|---|---|---|---|\n'
status=0
for scheme in $SCHEMES; do
	rec="$tmp/$scheme.ndjson"
	"$ev" listen --addr 127.0.0.1:0 --ready-file "$tmp/ready" --record "$rec" --count "$COUNT" --timeout 300s \
		--scheme "$scheme" --secret "$SECRET" >/dev/null 2>"$tmp/listen.err" &
	listen_pid=$!
	for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.1; done
	url=$(head -n 1 "$tmp/ready")
	"$ev" trigger track --url "$url/hooks" --scheme "$scheme" --secret "$SECRET" --count "$COUNT" --concurrency 64 >/dev/null
	wait "$listen_pid" || { echo "listen for $scheme failed:" >&2; cat "$tmp/listen.err" >&2; exit 1; }
	listen_pid=
	rm -f "$tmp/ready"
	best=999999
	for _ in $(seq "$RUNS"); do
		s=$(date +%s.%N)
		"$ev" verify --record "$rec" --scheme "$scheme" --secret "$SECRET" -o json >"$tmp/verdicts" 2>/dev/null || true
		e=$(date +%s.%N)
		t=$(echo "$e - $s" | bc -l)
		if (($(echo "$t < $best" | bc -l))); then best=$t; fi
	done
	lines=$(wc -l <"$rec")
	valid=$(grep -c '"valid":true' "$tmp/verdicts" || true)
	[ "$valid" = "$lines" ] || status=1
	printf '| %s | %d | %d MB | %.3f | %.0f | %d |\n' "$scheme" "$lines" "$(($(stat -c %s "$rec") >> 20))" "$best" \
		"$(echo "$lines / $best" | bc -l)" "$valid"
done
exit $status
