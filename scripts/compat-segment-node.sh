#!/usr/bin/env bash
# Checks that Segment's official Node library (@segment/analytics-node)
# works against `evfwd serve` unchanged: six calls in, six signed webhooks
# out, each verified by `evfwd listen`. Then the same over HTTPS (serve
# --tls-cert/--tls-key, a CA made for this run, NODE_EXTRA_CA_CERTS), with a
# Ruby Net::HTTP client that posts as analytics-ruby 2.4 does
# (compat-segment-ruby.rb: HTTPS only, one persistent connection) beside
# it, and a certificate reload (SIGHUP) between its two batches. Each part
# skips (exit 0) when its tool (node/npm and the npm registry, ruby,
# openssl) is unavailable; fails when a check itself fails.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

node_ok=1
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "compat: node/npm not found, analytics-node skipped"; node_ok=0
elif ! (cd "$work" && npm init -y >/dev/null 2>&1 && timeout 120 npm install --silent @segment/analytics-node@2 >/dev/null 2>&1); then
  echo "compat: could not install @segment/analytics-node from the npm registry, skipped"; node_ok=0
fi
ruby_ok=1
command -v ruby >/dev/null || { echo "compat: ruby not found, the analytics-ruby client skipped"; ruby_ok=0; }
[[ $node_ok == 1 || $ruby_ok == 1 ]] || exit 0

go build -o "$work/evfwd" .
printf 's3cret' >"$work/secret"

# serve_config NAME ADDR HOOKS_PORT [YAML...] writes $work/NAME.yaml.
serve_config() {
  local name=$1 addr=$2 hooks=$3
  shift 3
  cat >"$work/$name.yaml" <<YAML
addr: $addr
store: $work/$name.db
sources:
  - name: node
    write_key: wk_node
    webhooks:
      enabled: true
      shared_secret: s3cret
      endpoints:
        - url: http://127.0.0.1:$hooks/hooks
YAML
  printf '%s\n' "$@" >>"$work/$name.yaml"
}

# check_hooks LISTEN_PID NAME LABEL WANT SERVE_LOG: the listen started for
# NAME got WANT webhooks, each with a valid signature.
check_hooks() {
  local pid=$1 name=$2 label=$3 want=$4 log=$5
  if ! wait "$pid"; then
    echo "compat: FAIL: $label: not every call arrived as a signed webhook"; cat "$work/$name-listen.err" "$log"; exit 1
  fi
  valid=$(grep -c '"verdict":"valid"' "$work/$name-hooks.ndjson" || true)
  echo "compat: $label → evfwd serve → webhooks: $valid of $want arrived with a valid X-Signature"
  [[ "$valid" == "$want" ]]
}

cat >"$work/send.js" <<'JS'
const { Analytics } = require('@segment/analytics-node')
const a = new Analytics({ writeKey: 'wk_node', host: process.env.EVFWD_URL, flushInterval: 100 })
a.on('error', (e) => { console.error('analytics-node error:', e); process.exitCode = 1 })
a.track({ userId: 'u_js', event: 'Order Completed', properties: { total: 129.95, items: [{ sku: 'a' }] } })
a.identify({ userId: 'u_js', traits: { plan: 'pro' } })
a.page({ anonymousId: 'anon_js', name: 'Home', properties: { path: '/' } })
a.screen({ userId: 'u_js', name: 'Checkout' })
a.group({ userId: 'u_js', groupId: 'g1', traits: { name: 'Acme' } })
a.alias({ userId: 'u_js', previousId: 'anon_js' })
a.closeAndFlush()
JS

# Plain HTTP: analytics-node.
if [[ $node_ok == 1 ]]; then
  serve_config serve 127.0.0.1:18798 18799
  "$work/evfwd" listen --addr 127.0.0.1:18799 --secret-file "$work/secret" --count 6 --timeout 60s -o json >"$work/node-hooks.ndjson" 2>"$work/node-listen.err" &
  listen_pid=$!
  pids+=("$listen_pid")
  "$work/evfwd" serve --config "$work/serve.yaml" 2>"$work/serve.log" &
  pids+=("$!")
  for _ in $(seq 50); do curl -fs http://127.0.0.1:18798/healthz >/dev/null 2>&1 && break; sleep 0.1; done
  (cd "$work" && EVFWD_URL=http://127.0.0.1:18798 node send.js)
  check_hooks "$listen_pid" node @segment/analytics-node 6 "$work/serve.log"
fi

# HTTPS: a CA of this run's own and two certificates it signs for
# 127.0.0.1; serve starts on the first and reloads the second on SIGHUP.
command -v openssl >/dev/null || { echo "compat: openssl not found, the HTTPS run skipped"; exit 0; }
tls="$work/tls"
mkdir "$tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=evfwd compat CA" \
  -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
for n in 1 2; do
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=evfwd compat $n" \
    -keyout "$tls/$n.key" -out "$tls/$n.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$tls/ext"
  openssl x509 -req -in "$tls/$n.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -set_serial "$((0xC0 + n))" -days 1 \
    -extfile "$tls/ext" -out "$tls/$n.pem" 2>/dev/null
done
cp "$tls/1.pem" "$tls/cert.pem"
cp "$tls/1.key" "$tls/key.pem"
want=$((node_ok * 6 + ruby_ok * 6))
serve_config tls 127.0.0.1:18796 18797 "tls_cert: $tls/cert.pem" "tls_key: $tls/key.pem"
"$work/evfwd" listen --addr 127.0.0.1:18797 --secret-file "$work/secret" --count "$want" --timeout 60s -o json >"$work/tls-hooks.ndjson" 2>"$work/tls-listen.err" &
listen_pid=$!
pids+=("$listen_pid")
"$work/evfwd" serve --config "$work/tls.yaml" 2>"$work/serve-tls.log" &
serve_pid=$!
pids+=("$serve_pid")
for _ in $(seq 50); do curl -fs --cacert "$tls/ca.pem" https://127.0.0.1:18796/healthz >/dev/null 2>&1 && break; sleep 0.1; done
if [[ $node_ok == 1 ]]; then
  (cd "$work" && NODE_EXTRA_CA_CERTS="$tls/ca.pem" EVFWD_URL=https://127.0.0.1:18796 node send.js)
fi
if [[ $ruby_ok == 1 ]]; then
  # Between the batches: the second certificate in place, SIGHUP, and
  # wait for serve to say it reloaded.
  reload="cp '$tls/2.pem' '$tls/cert.pem' && cp '$tls/2.key' '$tls/key.pem' && kill -HUP $serve_pid &&
    for _ in \$(seq 50); do grep -q 'tls certificate reloaded' '$work/serve-tls.log' && exit 0; sleep 0.1; done; exit 1"
  if ! SSL_CERT_FILE="$tls/ca.pem" ruby scripts/compat-segment-ruby.rb https://127.0.0.1:18796 wk_node "$reload"; then
    echo "compat: FAIL: the analytics-ruby client over HTTPS"; cat "$work/serve-tls.log"; exit 1
  fi
  # A new connection sees the second certificate.
  shown=$(curl -sv --cacert "$tls/ca.pem" https://127.0.0.1:18796/healthz 2>&1 || true)
  if [[ "$shown" != *"subject: CN=evfwd compat 2"* ]]; then
    echo "compat: FAIL: after SIGHUP a new connection does not get the new certificate"; cat "$work/serve-tls.log"; exit 1
  fi
  echo "compat: SIGHUP reloaded serve's certificate; the open connection carried on, a new one got the new certificate"
fi
label="HTTPS:"
[[ $node_ok == 1 ]] && label+=" @segment/analytics-node"
[[ $node_ok == 1 && $ruby_ok == 1 ]] && label+=" and"
[[ $ruby_ok == 1 ]] && label+=" analytics-ruby 2.4's requests (Net::HTTP)"
check_hooks "$listen_pid" tls "$label" "$want" "$work/serve-tls.log"
