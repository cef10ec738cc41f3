#!/usr/bin/env bash
# image-rootfs.sh [DIR]: the files the Containerfile copies beside the
# binary, under DIR (default build/image): the build machine's CA bundle,
# /etc/passwd and /etc/group naming the user serve runs as (65532, the
# "nonroot" of distroless images), and the empty /data volume. goreleaser
# runs it before its builds; scripts/check-image.sh before its own.
set -euo pipefail
dir=${1:-build/image}
bundle=/etc/ssl/certs/ca-certificates.crt # Debian's ca-certificates
[[ -s $bundle ]] || { echo "image-rootfs.sh: no CA bundle at $bundle (apt-get install ca-certificates)" >&2; exit 1; }
rm -rf "$dir"
mkdir -p "$dir/etc/ssl/certs" "$dir/data"
cp "$bundle" "$dir/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nevfwd:x:65532:65532:evfwd:/data:/sbin/nologin\n' >"$dir/etc/passwd"
printf 'root:x:0:\nevfwd:x:65532:\n' >"$dir/etc/group"
