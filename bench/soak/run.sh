#!/usr/bin/env bash
# Soak: evfwd serve on SQLite with retention 30s, 1,000,000 events over about
# 3 minutes through a receiver answering 200. Prints the store's size every
# 10 s and the /metrics scrape time. Targets: size flat (±15%) once the
# window has passed; scrape < 5 ms throughout.
# Usage: bench/soak/run.sh [-events N] [-duration D] [-retention D]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
go build -o /tmp/evfwd-soak ./bench/soak
/tmp/evfwd-soak "$@"
