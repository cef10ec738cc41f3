#!/usr/bin/env bash
# Checks every webhook signature scheme of `evfwd sign` and `evfwd verify`
# against its owner's own library from npm (stripe, standardwebhooks, svix,
# @octokit/webhooks-methods, @slack/bolt, @shopify/shopify-api; versions
# pinned in scripts/compat-signatures/package.json), both ways: evfwd signs
# and the library must accept (and reject a tampered body); the library
# signs and evfwd verify must exit 0 (and 1 for a wrong secret or a
# tampered body). Then the owners' published examples in
# pkg/signature/testdata/vectors.json. The checks themselves are in
# scripts/compat-signatures/check.mjs. Skips (exit 0) when node/npm or the
# npm registry is unavailable; fails when a check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "compat-signatures: node/npm not found, skipped"; exit 0
fi
cp scripts/compat-signatures/package.json scripts/compat-signatures/check.mjs "$work/"
if ! (cd "$work" && timeout 180 npm install --loglevel=error --no-package-lock --no-audit --no-fund >"$work/npm.log" 2>&1); then
  echo "compat-signatures: could not install the owners' libraries from the npm registry, skipped"
  tail -5 "$work/npm.log"
  exit 0
fi

go build -o "$work/evfwd" .
vectors="$PWD/pkg/signature/testdata/vectors.json"
if ! (cd "$work" && node check.mjs "$work/evfwd" "$vectors"); then
  echo "compat-signatures: FAIL"; exit 1
fi
