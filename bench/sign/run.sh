#!/usr/bin/env bash
# Signs one 256 MiB file with `evfwd sign` and with `openssl dgst -sha1
# -hmac` in the same run, best of RUNS each, and prints both throughputs and
# their ratio (target: evfwd >= 1.0x openssl). Usage: bench/sign/run.sh [MiB]
set -euo pipefail
cd "$(dirname "$0")/../.."
mib=${1:-256}
runs=${RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/evfwd" .
head -c "$((mib << 20))" /dev/urandom >"$work/body"
cat "$work/body" >/dev/null # warm the page cache for both

best() { # best wall seconds of $runs runs of "$@"
  local b=999999 s e t
  for _ in $(seq "$runs"); do
    s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N)
    t=$(echo "$e - $s" | bc -l)
    if (($(echo "$t < $b" | bc -l))); then b=$t; fi
  done
  echo "$b"
}

ev=$(best "$work/evfwd" sign --secret s3cret "$work/body")
os=$(best openssl dgst -sha1 -hmac s3cret "$work/body")
want=$(openssl dgst -sha1 -hmac s3cret "$work/body" | awk '{print $NF}')
got=$("$work/evfwd" sign --secret s3cret "$work/body")
[[ "$want" == "$got" ]] || { echo "signatures differ: openssl $want, evfwd $got" >&2; exit 1; }
rss=$( { /usr/bin/time -f '%M' "$work/evfwd" sign --secret s3cret "$work/body" >/dev/null; } 2>&1 )

printf '%-28s %10s %12s %10s\n' "signer ($mib MiB, best of $runs)" seconds "MiB/s" "peak RSS"
printf '%-28s %10.3f %12.0f %8s KB\n' "evfwd sign" "$ev" "$(echo "$mib / $ev" | bc -l)" "$rss"
printf '%-28s %10.3f %12.0f %10s\n' "openssl dgst -sha1 -hmac" "$os" "$(echo "$mib / $os" | bc -l)" "-"
printf 'ratio evfwd/openssl: %.2fx\n' "$(echo "$os / $ev" | bc -l)"
