#!/usr/bin/env bash
# Whole-process benchmark of evfwd serve against issue 17's targets, each a
# ratio to a reference measured in the same run: forward (SQLite) over
# `evfwd trigger` into the same receiver, ingest (SQLite, 8 clients,
# durable) over a null collector, single-event requests on 16 and 128
# connections (a web source's browsers) over the null collector, ingest→webhook latency at 1,000 ev/s
# while a backlog drains, destinations (ingest into 10 destinations with
# subscriptions and mappings over 1 plain, batch {size: 100} forward over
# one event a request, rate_limit 50/s beside an unlimited destination for
# -rate-window, 60 s by default), PostgreSQL ingest and forward (1 node) and two
# clients posting batches with unique, then shared messageIds (issue 43:
# deadlocks, p99 against the unique run's) when EVFWD_BENCH_POSTGRES (or
# EVFWD_TEST_POSTGRES) holds a postgres:// URL,
# and serve's peak RSS. serve runs as a subprocess; see bench/serve/main.go.
# Prints one Markdown table; exit status 1 when a row fails.
#
#   bench/serve/run.sh
#   EVFWD_BENCH_EVENTS=50000 EVFWD_BENCH_BACKLOG=200000 bench/serve/run.sh
#   bench/serve/run.sh -cpuprofile /tmp/prof      # one profile per serve row
#   bench/serve/run.sh -rows web -web-events 100000
#   bench/serve/run.sh -rows overlap -overlap-batches 10000
#   bench/serve/run.sh -rows destinations                       # about 2 minutes
#   bench/serve/run.sh -rows destinations -events 20000 -rate-window 10s   # quick
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$root" && go build -o "$tmp/evfwd" . && go build -o "$tmp/serve-bench" ./bench/serve)
"$tmp/serve-bench" -evfwd "$tmp/evfwd" "$@"
