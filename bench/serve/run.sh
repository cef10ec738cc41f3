#!/usr/bin/env bash
# Benchmark evfwd serve in-process on loopback: ingest events/s with 1 and 8
# clients sending batches of 100, forward webhooks/s to a local receiver
# answering 200, and ingest→webhook latency at 1,000 events/s. First on
# SQLite (temp dir, WAL, synchronous=FULL); then, when EVFWD_BENCH_POSTGRES
# (or EVFWD_TEST_POSTGRES) holds a postgres:// URL, on PostgreSQL with 1 and
# 3 nodes sharing the database. Prints one Markdown table.
# Usage: [EVFWD_BENCH_POSTGRES=postgres://...] bench/serve/run.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
go build -o /tmp/evfwd-serve-bench ./bench/serve
/tmp/evfwd-serve-bench
pg=${EVFWD_BENCH_POSTGRES:-${EVFWD_TEST_POSTGRES:-}}
if [[ -n "$pg" ]]; then
  /tmp/evfwd-serve-bench -header=false -store "$pg" -nodes 1
  /tmp/evfwd-serve-bench -header=false -store "$pg" -nodes 3
fi
