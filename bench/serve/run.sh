#!/usr/bin/env bash
# Benchmark evfwd serve in-process on loopback (SQLite store in a temp dir,
# WAL, synchronous=FULL): ingest events/s with 1 and 8 clients sending
# batches of 100, forward webhooks/s to a local receiver answering 200, and
# ingest→webhook latency at 1,000 events/s. Prints a Markdown table.
# Usage: bench/serve/run.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
go run ./bench/serve
