#!/usr/bin/env bash
# Outage: evfwd serve on SQLite; the receiver answers 503 for 3 minutes,
# then 200, while 50,000 events are collected during the outage (over its
# first half). Prints requests at the dead endpoint during the outage, their
# peak per second, and the time from recovery to the last delivery.
# Targets: < 2,000 requests during the outage; every event delivered within
# 15 s of recovery.
# Usage: bench/outage/run.sh [-outage D] [-events N] [-compare] [-breaker=false]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
go build -o /tmp/evfwd-outage ./bench/outage
/tmp/evfwd-outage "$@"
