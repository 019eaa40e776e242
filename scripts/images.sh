#!/usr/bin/env bash
# Builds the local images from Debian's packages, with `docker import`
# (nothing is pulled from an image registry):
#   minik8s/busybox:latest  busybox with every applet, /www/index.html
#   minik8s/pause:latest    the same rootfs; runs a shell that waits for SIGTERM
# With --all (the quick start and the lab) also:
#   minik8s/nginx:latest    Debian's nginx and the libraries it loads, serving /usr/share/nginx/html on :80
#   minik8s/python:latest   Debian's python3 with its standard library
#   minik8s/function-runtime:latest  that python3 and images/function-runtime/server.py,
#                           the runtime of serverless Functions (also built by --functions)
# and tags them with the Docker Hub names tutorials use (busybox, busybox:1.28,
# nginx:1.14.2, python:3.11 ...). With MINIK8S_REGISTRY=HOST:PORT they are also
# pushed there (as HOST:PORT/library/NAME:TAG), the registry every node's
# dockerd uses as its mirror for Docker Hub names.
# Uses $DOCKER_HOST when set. Skips images that already exist.
set -euo pipefail
ALL=false FUNCTIONS=false
[ "${1:-}" = "--all" ] && ALL=true
[ "${1:-}" = "--functions" ] && FUNCTIONS=true
BUSYBOX=${BUSYBOX:-/bin/busybox}
[ -x "$BUSYBOX" ] || { echo "busybox-static is required at $BUSYBOX (apt-get install busybox-static)" >&2; exit 1; }
file -L "$BUSYBOX" 2>/dev/null | grep -q dynamically && { echo "$BUSYBOX is dynamically linked; install busybox-static" >&2; exit 1; }

have() { docker image inspect "$1" >/dev/null 2>&1; }
# The runtime image carries the hash of its server: an edited server.py is rebuilt.
RUNTIME_SOURCE="$(dirname "$0")/../images/function-runtime/server.py"
RUNTIME_HASH=$(sha256sum "$RUNTIME_SOURCE" | cut -c1-16)
have_runtime() {
  [ "$(docker image inspect -f '{{index .Config.Labels "io.minik8s.runtime-source"}}' minik8s/function-runtime:latest 2>/dev/null)" = "$RUNTIME_HASH" ]
}
if have minik8s/busybox:latest && have minik8s/pause:latest && ! $ALL \
  && { ! $FUNCTIONS || have_runtime; }; then exit 0; fi

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
$ALL || $FUNCTIONS || exit 0

# copy_with_libs ROOT FILE...: the files and the shared libraries they load.
copy_with_libs() {
  local dest=$1; shift
  for f in "$@"; do
    mkdir -p "$dest$(dirname "$f")"
    cp -aL "$f" "$dest$f"
    ldd "$f" 2>/dev/null | awk '/=> \// {print $3} /^[[:space:]]*\/lib/ {print $1}' | while read -r lib; do
      [ -e "$dest$lib" ] || { mkdir -p "$dest$(dirname "$lib")"; cp -aL "$lib" "$dest$lib"; }
    done
  done
}

if ! $FUNCTIONS && ! have minik8s/nginx:latest; then
  # Unpacked, not installed: installing would start an nginx on the host.
  debs=$(mktemp -d)
  download() { (cd "$debs" && apt-get download -q -o APT::Sandbox::User=root nginx nginx-common >/dev/null); }
  # A machine that never ran `apt-get update` has no package lists yet.
  download || { apt-get update -q >/dev/null && download; }
  for d in "$debs"/*.deb; do dpkg -x "$d" "$debs/x"; done
  nroot=$(mktemp -d)
  cp -a "$root/." "$nroot/"
  copy_with_libs "$nroot" "$debs/x/usr/sbin/nginx"
  mkdir -p "$nroot/usr/sbin" "$nroot/etc/nginx" "$nroot/usr/share/nginx/html" "$nroot/var/lib/nginx" "$nroot/var/log/nginx" "$nroot/run"
  mv "$nroot$debs/x/usr/sbin/nginx" "$nroot/usr/sbin/nginx"
  rm -rf "${nroot:?}$debs"
  cp "$debs/x/etc/nginx/mime.types" "$nroot/etc/nginx/"
  echo 'www-data:x:33:33:www-data:/var/www:/bin/sh' >>"$nroot/etc/passwd"
  echo 'www-data:x:33:' >>"$nroot/etc/group"
  cat >"$nroot/etc/nginx/nginx.conf" <<'CONF'
user www-data;
worker_processes auto;
pid /run/nginx.pid;
error_log /dev/stderr;
events { worker_connections 768; }
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log /dev/stdout;
  sendfile on;
  include /etc/nginx/conf.d/*.conf;
  server {
    listen 80 default_server;
    root /usr/share/nginx/html;
    index index.html;
  }
}
CONF
  mkdir -p "$nroot/etc/nginx/conf.d"
  cat >"$nroot/usr/share/nginx/html/index.html" <<'HTML'
<!DOCTYPE html>
<html><head><title>Welcome to nginx!</title></head>
<body><h1>Welcome to nginx!</h1>
<p>If you see this page, the nginx web server is successfully installed and working.</p></body></html>
HTML
  tar -C "$nroot" -c . | docker import -c 'ENV PATH=/usr/sbin:/bin' -c 'EXPOSE 80' \
    -c 'CMD ["nginx", "-g", "daemon off;"]' - minik8s/nginx:latest >/dev/null
  rm -rf "$debs" "$nroot"
fi

if ! have minik8s/python:latest; then
  py=$(ls /usr/bin/python3.[0-9]* 2>/dev/null | grep -E 'python3\.[0-9]+$' | sort -V | tail -1 || true)
  [ -n "$py" ] || { echo "Debian's python3 is required (apt-get install python3)" >&2; exit 1; }
  ver=${py##*/python}
  proot=$(mktemp -d)
  cp -a "$root/." "$proot/"
  copy_with_libs "$proot" "$py"
  mkdir -p "$proot/usr/lib"
  (cd /usr/lib && tar -c --exclude=__pycache__ --exclude="python$ver/test" --exclude="python$ver/idlelib" \
    --exclude="python$ver/tkinter" "python$ver") | tar -C "$proot/usr/lib" -x
  for so in /usr/lib/python"$ver"/lib-dynload/*.so; do copy_with_libs "$proot" "$so"; done
  ln -sf "python$ver" "$proot/usr/bin/python3"
  ln -sf "python$ver" "$proot/usr/bin/python"
  tar -C "$proot" -c . | docker import -c 'ENV PATH=/usr/bin:/bin' -c 'CMD ["python3"]' \
    - minik8s/python:latest >/dev/null
  rm -rf "$proot"
fi

# The serverless runtime: the python image plus the server, one layer more.
if ! have_runtime; then
  cid=$(docker create minik8s/python:latest)
  docker cp "$RUNTIME_SOURCE" "$cid:/function-runtime.py"
  docker commit -c 'ENV PYTHONUNBUFFERED=1' -c 'EXPOSE 8080' -c 'CMD ["python3", "/function-runtime.py"]' \
    -c "LABEL io.minik8s.runtime-source=$RUNTIME_HASH" \
    "$cid" minik8s/function-runtime:latest >/dev/null
  docker rm "$cid" >/dev/null
fi
$FUNCTIONS && { echo "images: minik8s/python:latest minik8s/function-runtime:latest"; exit 0; }

# The Docker Hub names tutorials use (nginx:1.16.0 is the image of the chart
# `helm create` makes).
names() {
  case $1 in
    busybox) echo "busybox:latest busybox:1.36 busybox:1.35 busybox:1.28 busybox:stable" ;;
    nginx) echo "nginx:latest nginx:stable nginx:alpine nginx:1.14.2 nginx:1.16.0 nginx:1.16.1 nginx:1.22 nginx:1.25 nginx:1.27" ;;
    python) echo "python:latest python:3 python:3.11 python:3.12 python:3-slim python:3.11-slim python:3.12-slim python:alpine" ;;
  esac
}
for image in busybox nginx python; do
  for name in $(names $image); do
    docker tag "minik8s/$image:latest" "$name"
    if [ -n "${MINIK8S_REGISTRY:-}" ]; then
      docker tag "minik8s/$image:latest" "$MINIK8S_REGISTRY/library/$name"
      docker push -q "$MINIK8S_REGISTRY/library/$name" >/dev/null
      docker rmi "$MINIK8S_REGISTRY/library/$name" >/dev/null
    fi
  done
done
echo "images: minik8s/nginx:latest minik8s/python:latest, tagged as $(names busybox) $(names nginx) $(names python)"
[ -z "${MINIK8S_REGISTRY:-}" ] || echo "pushed to $MINIK8S_REGISTRY"
