#!/usr/bin/env bash
# check-image.sh: build the Containerfile's image as a release does (a
# static linux binary of this tree, scripts/image-rootfs.sh) with buildah,
# and prove it: its config (user, entrypoint, port, volume, health check),
# its size, serve answering /readyz inside it and `evfwd healthcheck` saying
# so, and the README's demo run by the binary taken out of it. Installs
# Debian's podman and buildah when root and they are missing. Any failure,
# the build's first, fails the script.
#
# IMAGE_MAX_MB caps the image's size (default 40).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"
max_mb=${IMAGE_MAX_MB:-40}
image=localhost/evfwd:check

if ! command -v buildah >/dev/null || ! command -v podman >/dev/null; then
  [[ $(id -u) -eq 0 ]] || { echo "check-image.sh: needs buildah and podman (apt-get install podman buildah)" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman buildah >/dev/null
fi
# vfs: no overlay mounts in an unprivileged container; chroot: no OCI
# runtime needed to build, or (below) to run.
bh() { buildah --storage-driver vfs "$@"; }
pm() { podman --storage-driver vfs "$@"; }

work=$(mktemp -d /tmp/evfwd-image.XXXXXX)
ctr="" pid=""
cleanup() {
  [[ -z $pid ]] || kill -- -"$pid" 2>/dev/null || true
  [[ -z $ctr ]] || bh rm "$ctr" >/dev/null 2>&1 || true
  bh rmi "$image" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "check-image.sh: FAIL: $*" >&2; exit 1; }

echo "-- build"
ctx=$work/context
mkdir -p "$ctx"
CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o "$ctx/evfwd" .
(cd "$ctx" && "$OLDPWD/scripts/image-rootfs.sh" build/image)
cp Containerfile "$ctx/"
# docker format: OCI's image config has no HEALTHCHECK.
bh bud --isolation chroot --format docker --quiet -f Containerfile -t "$image" "$ctx" >"$work/build.log" 2>&1 ||
  { cat "$work/build.log"; fail "the image did not build"; }

echo "-- config and size"
got=$(pm image inspect --format '{{.Config.User}}|{{.Config.Entrypoint}}|{{.Config.Cmd}}|{{.Config.ExposedPorts}}|{{.Config.Volumes}}|{{.HealthCheck.Test}}' "$image")
want='65532:65532|[/evfwd]|[serve --log-format json]|map[8787/tcp:{}]|map[/data:{}]|[CMD /evfwd healthcheck]'
[[ $got == "$want" ]] || fail "image config: got $got, want $want"
size=$(pm image inspect --format '{{.Size}}' "$image")
echo "user 65532:65532, entrypoint /evfwd, port 8787/tcp, volume /data, HEALTHCHECK evfwd healthcheck; $((size / 1000000)) MB (cap $max_mb MB)"
((size <= max_mb * 1000000)) || fail "the image is $size bytes, over $max_mb MB"

echo "-- run"
port=28787
while (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
env=(-e "EVFWD_ADDR=127.0.0.1:$port")
if pm run --rm --network host "${env[@]}" "$image" version >"$work/run.log" 2>&1; then
  pm run -d --name evfwd-check --network host "${env[@]}" "$image" >/dev/null
  trap 'pm rm -f evfwd-check >/dev/null 2>&1 || true; cleanup' EXIT
  run_in() { pm exec evfwd-check "$@"; }
  echo "podman runs the image"
else
  # A sandbox that will not let the OCI runtime set the container's limits
  # (crun: setrlimit: Operation not permitted) still lets buildah run the
  # image's own entrypoint, user, environment and files in a chroot on the
  # host's network.
  echo "podman refused to run the image ($(grep -m1 -o 'Error: .*' "$work/run.log" || tail -n 1 "$work/run.log")): running it with buildah run --isolation chroot"
  ctr=$(bh from "$image")
  # Its own process group (setsid), so that stopping it reaches serve
  # through buildah's chroot helper.
  setsid buildah --storage-driver vfs run --isolation chroot --network host "${env[@]}" "$ctr" -- /evfwd serve --log-format json >"$work/serve.log" 2>&1 &
  pid=$!
  run_in() { bh run --isolation chroot --network host "${env[@]}" "$ctr" -- "$@"; }
fi
for _ in $(seq 100); do
  out=$(run_in /evfwd healthcheck 2>&1) && break
  [[ -z $pid ]] || kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; fail "serve stopped in the image"; }
  sleep 0.1
done
[[ $out == '200 {"status":"ok"}' ]] || { cat "$work/serve.log" 2>/dev/null || true; fail "evfwd healthcheck in the image: $out"; }
echo "serve in the image: evfwd healthcheck says $out"
run_in /evfwd healthcheck --url /nowhere >/dev/null 2>&1 && fail "evfwd healthcheck passed a 404"
if [[ -n $pid ]]; then
  # serve runs as the image's user (and so could write its store in
  # /data), and stops on SIGTERM as in a container.
  # (SIGTERM to serve itself: buildah's helper kills it on a signal of its own.)
  serve=$(pgrep -g "$pid" -x evfwd)
  uid=$(stat -c %u "/proc/$serve")
  [[ $uid == 65532 ]] || fail "serve in the image runs as uid $uid, not 65532"
  kill -TERM "$serve"
  code=0 && wait "$pid" || code=$?
  [[ $code == 0 ]] || { cat "$work/serve.log"; fail "serve in the image exited $code on SIGTERM"; }
  pid=""
  grep -q '"msg":"stopped"' "$work/serve.log" || { cat "$work/serve.log"; fail "serve did not say it stopped"; }
  echo "serve ran as uid 65532 with its store in /data, drained and exited 0 on SIGTERM"
fi

echo "-- the binary taken out of the image runs the README's demo"
mkdir "$work/out"
bh push --quiet "$image" "dir:$work/out/image" >/dev/null
# dir: holds the manifest and each blob by digest; the layers are tars
# (the config blob is not, and is skipped).
for blob in $(grep -o 'sha256:[0-9a-f]*' "$work/out/image/manifest.json" | cut -d: -f2); do
  tar -xf "$work/out/image/$blob" -C "$work/out" evfwd 2>/dev/null || true
done
[[ -x $work/out/evfwd ]] || fail "no /evfwd in the image's layers"
"$work/out/evfwd" demo | tail -n 1
echo "check-image.sh: ok"
