#!/usr/bin/env bash
# Benchmark `evfwd listen --secret S --record FILE -o json` against a bare
# Go net/http handler with wrk: same body, same connections, same run; and
# the same listen with --ui while a page watches its event stream.
# Usage: bench/listen/run.sh [DURATION] [CONNECTIONS]
set -euo pipefail

DURATION=${1:-10s}
CONNS=${2:-16}
THREADS=${THREADS:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

if ! command -v wrk >/dev/null; then
  echo "installing wrk" >&2
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq wrk >/dev/null
fi

echo "building" >&2
(cd "$ROOT" && go build -o "$WORK/evfwd" . && go build -o "$WORK/bare" ./bench/listen/bare)

SECRET=S
# A ~400-byte track message as the webhook destination sends it.
BODY='{"type":"track","version":1,"messageId":"4f1d5b7e-9a1c-4b8e-8d2a-3c6f0e9b7a21","userId":"u_42","anonymousId":"a_7f3c","event":"Order Completed","properties":{"order_id":"o_1001","total":129.95,"currency":"EUR","coupon":"SPRING","items":3},"context":{"ip":"203.0.113.7","library":{"name":"evfwd","version":"0.1.0"},"userAgent":"Mozilla/5.0 (X11; Linux x86_64)"},"timestamp":"2024-05-01T12:00:00.123Z"}'
SIG=$(printf '%s' "$BODY" | "$WORK/evfwd" sign --secret "$SECRET")
export BODY SIG

# waitready URL: poll until the server answers (startup only, not measured).
waitready() {
  for _ in $(seq 100); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.05
  done
  echo "server at $1 did not start" >&2; exit 1
}

# cputicks PID: user+system CPU of PID in clock ticks.
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# bench NAME URL PID: run wrk, print "req/s p99_us requests non2xx errors
# cpu_us_per_request". CPU per request is the figure that a busy machine
# (other jobs stealing cores) disturbs least.
bench() {
  local out t0 t1
  t0=$(cputicks "$3")
  out=$(wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s "$ROOT/bench/listen/post.lua" "$2")
  t1=$(cputicks "$3")
  local rps res n
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  res=$(grep '^RESULT' <<<"$out")
  n=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$res")
  echo "$1 $rps $(sed -E 's/.*requests=([0-9]+) p99_us=([0-9]+) errors=([0-9]+) non2xx=([0-9]+).*/\2 \1 \4 \3/' <<<"$res") \
$(awk -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v n="$n" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}')"
}

"$WORK/bare" -addr 127.0.0.1:18789 & PIDS+=($!)
waitready http://127.0.0.1:18789/
read -r _ bare_rps bare_p99 bare_n bare_bad bare_err bare_cpu < <(bench bare http://127.0.0.1:18789/hooks "${PIDS[0]}")
kill "${PIDS[0]}"; wait "${PIDS[0]}" 2>/dev/null || true

REC="$WORK/record.ndjson"
"$WORK/evfwd" listen --addr 127.0.0.1:18788 --secret "$SECRET" --record "$REC" -o json \
  --ready-file "$WORK/ready" >/dev/null 2>"$WORK/listen.err" & LPID=$!
PIDS+=($LPID)
for _ in $(seq 100); do [ -s "$WORK/ready" ] && break; sleep 0.05; done
read -r _ ev_rps ev_p99 ev_n ev_bad ev_err ev_cpu < <(bench listen http://127.0.0.1:18788/hooks "$LPID")
kill -INT "$LPID"; wait "$LPID" || true   # clean stop flushes the record file

# Every request wrk counts was answered, hence recorded; the listener may
# have recorded a few more that wrk sent but stopped waiting for.
recorded=$(wc -l <"$REC")
valid=$(grep -c '"signature":{"verdict":"valid"' "$REC" || true)

# The same with the inspector, a page watching (curl reading the stream).
"$WORK/evfwd" listen --addr 127.0.0.1:18788 --secret "$SECRET" --record "$WORK/ui.ndjson" -o json \
  --ui --ui-addr 127.0.0.1:18790 --ready-file "$WORK/ready-ui" >/dev/null 2>"$WORK/listen-ui.err" & UPID=$!
PIDS+=($UPID)
for _ in $(seq 100); do [ -s "$WORK/ready-ui" ] && break; sleep 0.05; done
curl -sN http://127.0.0.1:18790/api/events >"$WORK/events" & PIDS+=($!)
read -r _ ui_rps ui_p99 ui_n ui_bad ui_err ui_cpu < <(bench listen-ui http://127.0.0.1:18788/hooks "$UPID")
kill -INT "$UPID"; wait "$UPID" || true
streamed=$(grep -c '^event: request' "$WORK/events" || true)

ratio=$(awk -v a="$ev_rps" -v b="$bare_rps" 'BEGIN {printf "%.2f", a/b}')
printf '\n%-34s %10s %10s %10s %8s %12s\n' "server ($CONNS conns, $DURATION)" "req/s" "p99" "requests" "non-2xx" "CPU µs/req"
printf '%-34s %10.0f %8.2fms %10d %8d %12s\n' "bare net/http" "$bare_rps" "$(awk -v u="$bare_p99" 'BEGIN{print u/1000}')" "$bare_n" "$bare_bad" "$bare_cpu"
printf '%-34s %10.0f %8.2fms %10d %8d %12s\n' "evfwd listen --record -o json" "$ev_rps" "$(awk -v u="$ev_p99" 'BEGIN{print u/1000}')" "$ev_n" "$ev_bad" "$ev_cpu"
printf '%-34s %10.0f %8.2fms %10d %8d %12s\n' "... --ui, a page watching" "$ui_rps" "$(awk -v u="$ui_p99" 'BEGIN{print u/1000}')" "$ui_n" "$ui_bad" "$ui_cpu"
printf '%-34s %10sx  (target >= 0.70x; CPU per request %sx)\n' "ratio" "$ratio" "$(awk -v a="$bare_cpu" -v b="$ev_cpu" 'BEGIN {printf "%.2f", a/b}')"
printf '%-34s %10sx  (CPU per request %sx); the page got %d events\n%-34s %s\n' "--ui / without" \
  "$(awk -v a="$ui_rps" -v b="$ev_rps" 'BEGIN {printf "%.2f", a/b}')" "$(awk -v a="$ui_cpu" -v b="$ev_cpu" 'BEGIN {printf "%.2f", a/b}')" "$streamed" "" "until it fell behind and its stream was cut (a page reconnects and reloads the list)"
printf '%-34s %10d lines, %d with a valid signature (wrk counted %d)\n' "record file" "$recorded" "$valid" "$ev_n"

status=0
if [ "$recorded" -lt "$ev_n" ] || [ "$valid" -lt "$ev_n" ]; then
  echo "FAIL: the record file is missing requests" >&2; status=1
fi
if awk -v r="$ratio" 'BEGIN {exit !(r < 0.70)}'; then
  echo "FAIL: below 0.70x the bare handler" >&2; status=1
fi
exit $status
