#!/usr/bin/env bash
# Checks that Segment's official Node library (@segment/analytics-node)
# works against `evfwd serve` unchanged: six calls in, six signed webhooks
# out, each verified by `evfwd listen`. Skips (exit 0) when node/npm or the
# npm registry is unavailable; fails when the check itself fails.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null && command -v npm >/dev/null || { echo "compat: node/npm not found, skipped"; exit 0; }
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

if ! (cd "$work" && npm init -y >/dev/null 2>&1 && timeout 120 npm install --silent @segment/analytics-node@2 >/dev/null 2>&1); then
  echo "compat: could not install @segment/analytics-node from the npm registry, skipped"
  exit 0
fi
go build -o "$work/evfwd" .
printf 's3cret' >"$work/secret"
cat >"$work/serve.yaml" <<YAML
addr: 127.0.0.1:0
store: $work/evfwd.db
sources:
  - name: node
    write_key: wk_node
    webhooks:
      enabled: true
      shared_secret: s3cret
      endpoints:
        - url: http://127.0.0.1:18799/hooks
YAML
"$work/evfwd" listen --addr 127.0.0.1:18799 --secret-file "$work/secret" --count 6 --timeout 60s -o json >"$work/hooks.ndjson" 2>"$work/listen.err" &
listen_pid=$!
pids+=("$listen_pid")
sed -i 's/^addr: .*/addr: 127.0.0.1:18798/' "$work/serve.yaml"
"$work/evfwd" serve --config "$work/serve.yaml" 2>"$work/serve.log" &
pids+=("$!")
for _ in $(seq 50); do curl -fs http://127.0.0.1:18798/healthz >/dev/null 2>&1 && break; sleep 0.1; done

cat >"$work/send.js" <<'JS'
const { Analytics } = require('@segment/analytics-node')
const a = new Analytics({ writeKey: 'wk_node', host: 'http://127.0.0.1:18798', flushInterval: 100 })
a.on('error', (e) => { console.error('analytics-node error:', e); process.exitCode = 1 })
a.track({ userId: 'u_js', event: 'Order Completed', properties: { total: 129.95, items: [{ sku: 'a' }] } })
a.identify({ userId: 'u_js', traits: { plan: 'pro' } })
a.page({ anonymousId: 'anon_js', name: 'Home', properties: { path: '/' } })
a.screen({ userId: 'u_js', name: 'Checkout' })
a.group({ userId: 'u_js', groupId: 'g1', traits: { name: 'Acme' } })
a.alias({ userId: 'u_js', previousId: 'anon_js' })
a.closeAndFlush()
JS
(cd "$work" && node send.js)
if ! wait "$listen_pid"; then
  echo "compat: FAIL: not every call arrived as a signed webhook"; cat "$work/listen.err" "$work/serve.log"; exit 1
fi
valid=$(grep -c '"verdict":"valid"' "$work/hooks.ndjson" || true)
echo "compat: @segment/analytics-node → evfwd serve → webhooks: $valid of 6 arrived with a valid X-Signature"
[[ "$valid" == 6 ]]
