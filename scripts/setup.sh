#!/bin/sh
# setup.sh — installs the system packages disc needs (Debian 12, apt-get)
# and the pinned onnx pip package the conformance tests use. Idempotent.
# With --if-needed it only acts when something is missing.
set -eu

# libamdhip64-dev, libhiprtc-builtins5, rocm-device-libs: HIPRTC, for the
# gpu-compile tests of the HIP kernels (loaded with dlopen; disc builds
# without them)
PKGS="cmake make gcc python3 pkg-config llvm-14-dev libdnnl-dev protobuf-c-compiler
libprotobuf-c-dev libonnx-dev libisl-dev libamdhip64-dev libhiprtc-builtins5 rocm-device-libs"

missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done

if [ -z "$missing" ]; then
    [ "${1:-}" = "--if-needed" ] || echo "setup: all packages present"
else
    echo "setup: installing:$missing"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

# Test dependency: ONNX's backend node tests (tests/conformance) ship inside
# the onnx pip package. Pinned; skipped when that version is importable. The
# conformance tests skip themselves if it cannot be installed.
ONNX_VERSION=1.17.0
if ! python3 -c "import sys, onnx; sys.exit(onnx.__version__ != '$ONNX_VERSION')" 2>/dev/null; then
    echo "setup: installing onnx==$ONNX_VERSION (pip, for the conformance tests)"
    python3 -m pip install --quiet "onnx==$ONNX_VERSION" 2>/dev/null ||
        python3 -m pip install --quiet --user --break-system-packages "onnx==$ONNX_VERSION" ||
        echo "setup: warning: could not install onnx==$ONNX_VERSION; the onnx/node_tests test will be skipped"
fi
