#!/usr/bin/env bash
# Issue 43's memory attack on `evfwd serve`: N connections (default 8000)
# that each send `POST /v1/b` with Content-Length: 513024 and one byte, no
# write key, then hold. Prints serve's memory idle and under the attack
# (VmRSS, VmHWM and VmSize from /proc, the Go heap from /metrics) and the
# answer to a client's event sent meanwhile. VLIMIT=KB runs serve under
# `ulimit -v KB` (before issue 43's fix, 2621440 killed it); EVFWD=BINARY
# measures that binary instead of building this tree; SETTLE is how long
# the attack runs before the sample (default 15 s). Needs python3 and curl.
# Usage: bench/attack/run.sh [N] [PORT]
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-8000}
port=${2:-18787}
work=$(mktemp -d)
pids=()
# serve drains (up to its 10 s grace) before its directory goes.
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
ulimit -n $((n + 1000))

evfwd=${EVFWD:-$work/evfwd}
[[ -n "${EVFWD:-}" ]] || go build -o "$evfwd" .
key=wk_attack_bench
cat >"$work/evfwd.yaml" <<YAML
addr: 127.0.0.1:$port
store: sqlite://$work/evfwd.db
sources:
  - name: web
    write_key: $key
YAML
( if [[ -n "${VLIMIT:-}" ]]; then ulimit -v "$VLIMIT"; fi
  exec "$evfwd" serve --config "$work/evfwd.yaml" --log-level warn 2>"$work/serve.log" ) &
serve=$!
pids+=("$serve")
base=http://127.0.0.1:$port
for _ in $(seq 100); do curl -sf -o /dev/null "$base/livez" && break; sleep 0.1; done

sample() { # the row of one moment
  local st heap
  if ! st=$(cat "/proc/$serve/status" 2>/dev/null); then
    printf '| %-24s | %s |\n' "$1" "serve died: $(grep -m1 -o 'fatal error: .*' "$work/serve.log" || echo exited)"
    return 1
  fi
  heap=$(curl -s "$base/metrics" | awk '/^go_memstats_heap_alloc_bytes/ {printf "%.0f", $2 / 1048576}')
  printf '| %-24s | %7s MB | %7s MB | %7s MB | %7s MB |\n' "$1" \
    "$(awk '/^VmRSS/ {print int($2 / 1024)}' <<<"$st")" "$(awk '/^VmHWM/ {print int($2 / 1024)}' <<<"$st")" \
    "$(awk '/^VmSize/ {print int($2 / 1024)}' <<<"$st")" "${heap:--}"
}

echo "| serve ($n connections) | VmRSS | VmHWM | VmSize | Go heap |"
echo "|---|---:|---:|---:|---:|"
sample idle
mkfifo "$work/sent"
settle=${SETTLE:-15}
python3 - "$n" "$port" "$((settle + 30))" >"$work/sent" <<'PY' &
import socket, sys, time
n, port, hold = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
s = [socket.create_connection(('127.0.0.1', port)) for _ in range(n)]
for x in s:
    try:
        x.send(b'POST /v1/b HTTP/1.1\r\nHost: x\r\nContent-Length: 513024\r\n\r\n{')
    except OSError:
        pass
print("sent", flush=True)
time.sleep(hold)
PY
pids+=($!)
read -r _ <"$work/sent"
# Until serve has a goroutine on each connection (or has died), then
# SETTLE seconds (default 15) for every request to reach its body: well
# inside serve's 60 s read timeout, which ends the attack's requests.
for _ in $(seq 200); do
  g=$(curl -s -m 2 "$base/metrics" | awk '/^go_goroutines/ {print $2}') || true
  [[ -z "$g" || "$g" -ge "$n" ]] && break
  sleep 0.1
done
sleep "$settle"
if sample "under attack"; then
  answer=$(curl -s -m 10 -o /dev/null -w '%{http_code} in %{time_total} s' -u "$key:" \
    -d '{"type":"track","userId":"u","event":"During the attack"}' "$base/v1/track" || true)
  echo
  echo "a client's event meanwhile: $answer"
fi
