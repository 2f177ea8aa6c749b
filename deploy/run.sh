#!/usr/bin/env bash
# Several bsard-demo app processes behind nginx, on this machine (deploy/README.md).
#
#   deploy/run.sh servers   start one `streamlit run app.py` per port of $APP_PORTS (background)
#   deploy/run.sh nginx     write $RUN_DIR/nginx.conf from deploy/nginx.conf.template and run
#                           nginx in the foreground (Ctrl-C or SIGTERM stops it)
#   deploy/run.sh stop      stop the app processes started by `servers` (their pid files)
#
# Environment: the app's own (BSARD_DATA, BSARD_INDEX, BSARD_CACHE: one read-only bundle and one
# cache folder shared by every process; HF_TOKEN...), PYTHON (default: python), APP_PORTS
# (default "8501 8502"), NGINX_PORT (default 8080), RUN_DIR (default /tmp/bsard-deploy: logs,
# pid files, nginx's configuration and temporary files). Everything listens on 127.0.0.1; put a
# TLS front (or nginx's own `listen 443 ssl`) before exposing it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python}"
APP_PORTS="${APP_PORTS:-8501 8502}"
NGINX_PORT="${NGINX_PORT:-8080}"
RUN_DIR="${RUN_DIR:-/tmp/bsard-deploy}"
mkdir -p "$RUN_DIR"

servers() {
    cd "$ROOT"
    for port in $APP_PORTS; do
        nohup "$PYTHON" -m streamlit run app.py --server.address 127.0.0.1 --server.port "$port" \
            --server.headless true --server.fileWatcherType none >"$RUN_DIR/app-$port.log" 2>&1 &
        echo $! >"$RUN_DIR/app-$port.pid"
        echo "app on 127.0.0.1:$port (pid $!, log $RUN_DIR/app-$port.log)"
    done
}

nginx_conf() {
    local upstreams=""
    for port in $APP_PORTS; do
        upstreams+="        server 127.0.0.1:$port max_fails=1 fail_timeout=5s;"$'\n'
    done
    mkdir -p "$RUN_DIR"/{client_body,proxy,fastcgi,uwsgi,scgi}
    UPSTREAMS="$upstreams" RUN_DIR="$RUN_DIR" NGINX_PORT="$NGINX_PORT" "$PYTHON" - "$ROOT/deploy/nginx.conf.template" \
        "$RUN_DIR/nginx.conf" <<'PY'
import os, sys
text = open(sys.argv[1]).read()
for name in ("RUN_DIR", "NGINX_PORT", "UPSTREAMS"):
    text = text.replace(f"@{name}@", os.environ[name].rstrip("\n"))
open(sys.argv[2], "w").write(text)
PY
    nginx -t -q -c "$RUN_DIR/nginx.conf" -p "$RUN_DIR"
}

case "${1:-}" in
    servers) servers ;;
    nginx) nginx_conf; echo "nginx on http://127.0.0.1:$NGINX_PORT -> $APP_PORTS"; exec nginx -c "$RUN_DIR/nginx.conf" -p "$RUN_DIR" ;;
    stop) for f in "$RUN_DIR"/app-*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; rm -f "$f"; done ;;
    *) sed -n '2,16p' "$0"; exit 2 ;;
esac
