#!/bin/sh
# run_on_device.sh — issue 13's device check, in one call on a lent GPU
# machine (which has the CUDA driver, a C compiler, nvcc and
# compute-sanitizer, but no LLVM or oneDNN).
#
#   here:   sh tests/gpu/run_on_device.sh --prepare
#           (build/dcc and NVRTC: the CUBINs and PTX of a test module,
#           into tests/gpu/device/, which git ignores)
#   there:  the device tool's run with carry ["tests/gpu/device"] and
#           command "sh tests/gpu/run_on_device.sh"
#
# What it checks today: the driver layer (runtime/cudrv.c) on the real
# driver: device 0, its memory, copies, the caching allocator, the modules
# dcc compiled here loaded by the driver with their kernels, all under
# compute-sanitizer's memcheck. Logs go to $OUT (the tool brings them back).
set -eu
cd "$(dirname "$0")/../.."
dev=tests/gpu/device
if [ "${1:-}" = --prepare ]; then
    mkdir -p $dev
    for arch in sm_80 sm_90; do
        build/dcc emit tests/gpu/loop_vec.disc --stage cubin --arch $arch -o $dev/loop_vec.$arch.cubin
    done
    build/dcc emit tests/gpu/loop_vec.disc --stage ptx --arch sm_80 -o $dev/loop_vec.sm_80.ptx
    ls -l $dev
    exit 0
fi
out=${OUT:-/tmp/disc-device}
mkdir -p "$out"
log="$out/device.log"
: > "$log"
say() { echo "$@" | tee -a "$log"; }
say "== $(date -u) $(uname -m)"
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1 | tee -a "$log" || true
cc -O1 -g -std=gnu11 -Iinclude -I. -o "$out/test_cudrv" tests/unit/test_cudrv.c runtime/cudrv.c runtime/rt.c \
    runtime/pool.c runtime/env.c runtime/prof.c tests/gpu/no_dnnl.c -ldl -lpthread -lm 2>&1 | tee -a "$log"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
fail=0
for m in "$dev/loop_vec.sm_$cap.cubin" "$dev/loop_vec.sm_80.ptx"; do
    [ -f "$m" ] || { say "missing $m (run --prepare here first)"; fail=1; continue; }
    say "== test_cudrv --module $m"
    "$out/test_cudrv" --module "$m" disc_k0 disc_k1 >> "$log" 2>&1 || fail=1
    tail -1 "$log"
done
if command -v compute-sanitizer > /dev/null; then
    say "== compute-sanitizer memcheck"
    compute-sanitizer --tool memcheck --error-exitcode 9 "$out/test_cudrv" --module "$dev/loop_vec.sm_80.ptx" disc_k0 \
        >> "$log" 2>&1 || fail=1
    tail -3 "$log"
fi
say "== device check: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
