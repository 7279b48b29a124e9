#!/bin/sh
# install_test.sh BUILD SRC — installs into an empty prefix, then builds and
# runs examples/compile_run.c with nothing but `pkg-config --cflags --libs disc`.
set -eu
build=$1
src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
test -f "$prefix/include/disc.h"
test -f "$prefix/lib/libdisc.a"
test -f "$prefix/share/man/man1/dcc.1"
test -x "$prefix/bin/dcc"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -o "$prefix/compile_run" "$src/examples/compile_run.c" $(pkg-config --cflags --libs disc)
"$prefix/compile_run" "$src/tests/models/mlp_norm/model.onnx"
echo "install test: ok"
# the installed archive exports the API and nothing else
bad=$(nm -g --defined-only "$prefix/lib/libdisc.a" | awk 'NF == 3 && $3 !~ /^disc_/ {print $3}' | head -5)
if [ -n "$bad" ]; then
    echo "libdisc.a exports non-disc symbols: $bad"
    exit 1
fi
echo "nm: only disc_* symbols are global in libdisc.a"
