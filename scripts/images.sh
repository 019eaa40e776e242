#!/usr/bin/env bash
# Builds the local images from Debian's busybox-static, with `docker import`
# (nothing is pulled):
#   minik8s/busybox:latest  busybox with every applet, /www/index.html
#   minik8s/pause:latest    the same rootfs; runs a shell that waits for SIGTERM
# Uses $DOCKER_HOST when set. Skips images that already exist.
set -euo pipefail
BUSYBOX=${BUSYBOX:-/bin/busybox}
[ -x "$BUSYBOX" ] || { echo "busybox-static is required at $BUSYBOX (apt-get install busybox-static)" >&2; exit 1; }
file -L "$BUSYBOX" 2>/dev/null | grep -q dynamically && { echo "$BUSYBOX is dynamically linked; install busybox-static" >&2; exit 1; }

have() { docker image inspect "$1" >/dev/null 2>&1; }
if have minik8s/busybox:latest && have minik8s/pause:latest; then exit 0; fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,tmp,etc,proc,sys,dev,www,root}
cp "$BUSYBOX" "$root/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
echo '<h1>hello from minik8s</h1>' >"$root/www/index.html"

have minik8s/busybox:latest || tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' - minik8s/busybox:latest >/dev/null
# The sandbox holds the pod's namespaces; it exits at once on SIGTERM.
have minik8s/pause:latest || tar -C "$root" -c . | docker import -c 'ENV PATH=/bin' \
  -c 'CMD ["/bin/sh", "-c", "trap \"exit 0\" TERM INT; while :; do sleep 3600 & wait $!; done"]' - minik8s/pause:latest >/dev/null
echo "images: minik8s/busybox:latest minik8s/pause:latest"
