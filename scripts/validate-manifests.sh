#!/usr/bin/env bash
# validate-manifests.sh: check deploy/kubernetes without a cluster or the
# network. deploy/kubernetes/validate (a Go module of its own, so evfwd's
# go.mod never carries Kubernetes; its modules come through the Go module
# proxy) decodes every manifest strictly into its k8s.io/api type and holds
# it to what OPERATIONS.md promises, and has this tree's evfwd judge the
# Secret's config (serve --check); its test proves each check fails when
# its promise is broken.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
bin=$(mktemp -d /tmp/evfwd-validate.XXXXXX)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/evfwd" .
cd deploy/kubernetes/validate
go vet ./...
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
go test -count=1 ./...
go run . -evfwd "$bin/evfwd" ..
