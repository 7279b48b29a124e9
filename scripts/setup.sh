#!/bin/sh
# setup.sh — installs the system packages disc needs (Debian 12, apt-get).
# Idempotent. With --if-needed it only acts when something is missing.
set -eu

PKGS="cmake make gcc python3 llvm-14-dev libdnnl-dev protobuf-c-compiler
libprotobuf-c-dev libonnx-dev libisl-dev"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done

if [ -z "$missing" ]; then
    [ "${1:-}" = "--if-needed" ] || echo "setup: all packages present"
    exit 0
fi

echo "setup: installing:$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
