#!/bin/sh
# install_test.sh BUILD SRC — installs into an empty prefix, then builds and
# runs examples/compile_run.c with nothing but `pkg-config --cflags --libs disc`,
# and examples/aot_example.c on a model the installed dcc compiles, with
# nothing but the object and `pkg-config --cflags --libs disc-rt`.
set -eu
build=$1
src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
test -f "$prefix/include/disc.h"
test -f "$prefix/lib/libdisc.a"
test -f "$prefix/lib/libdisc_rt.a"
test -f "$prefix/share/man/man1/dcc.1"
test -x "$prefix/bin/dcc"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -o "$prefix/compile_run" "$src/examples/compile_run.c" $(pkg-config --cflags --libs disc)
"$prefix/compile_run" "$src/tests/models/mlp_norm/model.onnx"
"$prefix/bin/dcc" compile "$src/tests/models/bert_encoder/model.onnx" -o "$prefix/bert.o" \
    --emit-header "$prefix/bert.h" --name bert
cc -o "$prefix/aot_example" -I"$prefix" "$src/examples/aot_example.c" "$prefix/bert.o" \
    $(pkg-config --cflags --libs disc-rt)
"$prefix/aot_example"
echo "install test: ok"
# the installed archive exports the API and nothing else
for lib in libdisc.a libdisc_rt.a; do
    bad=$(nm -g --defined-only "$prefix/lib/$lib" | awk 'NF == 3 && $3 !~ /^disc_/ {print $3}' | head -5)
    if [ -n "$bad" ]; then
        echo "$lib exports non-disc symbols: $bad"
        exit 1
    fi
    echo "nm: only disc_* symbols are global in $lib"
done
# the runtime archive carries none of the compiler
if nm "$prefix/lib/libdisc_rt.a" | grep -qE " U (LLVM|protobuf_c|isl_)"; then
    echo "libdisc_rt.a needs LLVM, protobuf-c or ISL"
    exit 1
fi
echo "nm: libdisc_rt.a needs no LLVM, protobuf-c or ISL"
