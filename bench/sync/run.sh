#!/usr/bin/env bash
# Benchmark what a 1,000,000-member audience sync does to ingest: evfwd serve
# in-process on SQLite (temp dir, WAL, synchronous=FULL), 200 /v1/batch
# requests/s of 5 events each, and meanwhile a first sync of 1M members and
# a second with 100k leaving and 100k joining, through the admin API, while
# the forwarder delivers the identify messages to a local 200 receiver.
# Prints, per sync, its duration and the ingest latency (p50/p99/max) of the
# requests sent while it ran, and the WAL's peak size. Then the same on
# PostgreSQL when EVFWD_BENCH_POSTGRES (or EVFWD_TEST_POSTGRES) holds a
# postgres:// URL. Extra arguments go to the program (e.g. -members 100000).
# Usage: [EVFWD_BENCH_POSTGRES=postgres://...] bench/sync/run.sh [flags]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
go build -o /tmp/evfwd-sync-bench ./bench/sync
/tmp/evfwd-sync-bench "$@"
pg=${EVFWD_BENCH_POSTGRES:-${EVFWD_TEST_POSTGRES:-}}
if [[ -n "$pg" ]]; then
  /tmp/evfwd-sync-bench -header=false -store "$pg" "$@"
fi
