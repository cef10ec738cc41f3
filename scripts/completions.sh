#!/usr/bin/env bash
# Regenerates completions/ from the command tree; with --check, fails when
# the committed scripts differ from what the code generates.
set -euo pipefail
cd "$(dirname "$0")/.."
out=completions
if [[ "${1:-}" == "--check" ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
bin=$(mktemp -d)/evfwd
go build -o "$bin" .
"$bin" completion bash >"$out/evfwd.bash"
"$bin" completion zsh >"$out/_evfwd"
"$bin" completion fish >"$out/evfwd.fish"
"$bin" completion powershell >"$out/evfwd.ps1"
rm -f "$bin"
if [[ "${1:-}" == "--check" ]]; then
  if ! diff -r completions "$out" >/dev/null; then
    diff -r completions "$out" | head -20
    echo "completions/ is out of date: run scripts/completions.sh and commit the result" >&2
    exit 1
  fi
  echo "completions up to date"
fi
