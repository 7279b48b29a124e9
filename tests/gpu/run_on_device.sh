#!/bin/sh
# run_on_device.sh — issue 13's device check, in one call on a lent GPU
# machine (which has the CUDA driver, a C compiler, python3 with numpy,
# nvcc and compute-sanitizer, but no LLVM or oneDNN).
#
#   here:   sh tests/gpu/run_on_device.sh --prepare
#           (with build/ built: into tests/gpu/device/, which git ignores,
#           the CUBINs and PTX of a test module, every model test compiled
#           ahead of time for cuda -- dcc compile --backend cuda --cpu
#           x86-64-v3, CUBINs for sm_80 and sm_90 and PTX, its matmuls on
#           cuBLASLt and its convolutions on cuDNN; the transformers and a
#           CNN a second time with disc's own GEMM and conv kernels
#           (DISC_CUBLASLT=0 DISC_CUDNN=0) -- with its data sets as raw
#           tensors, the runtime archive, and stubs for the oneDNN entry
#           points the archive names)
#           and bench/gpu_bench.py's objects of BERT-base and GPT-2, f32
#           and f16, fused and --no-fuse, their weights as xz (bench/)
#   there:  the device tool's run with carry ["tests/gpu/device"] and
#           command "sh tests/gpu/run_on_device.sh [--tests | --bench [ARGS]
#           | --profile [ARGS]]" (tests and bench by default; ARGS go to
#           gpu_bench.py run, e.g. --no-compile, --models bert_base or
#           --dtypes f32; --profile's to gpu_bench.py profile, where the
#           time goes per kernel: --shapes 16x512 --dtypes f16). With 15
#           minutes of device time, two commands (each under the tool's 10
#           minutes; OUT=/tmp/x for the first part of each so the second's
#           device.log does not overwrite it): "--tests" then "--bench
#           --dtypes f32" (the H200: 290 s; torch.compile compiles each
#           model twice, its dynamic graph and batch 1), then "--bench
#           --dtypes f16" and "--profile --shapes 16x512,4x128 --no-torch"
#           (164 + about 60 s); each report says how long each model took.
#
# What it checks: the driver layer (runtime/cudrv.c) on the real driver
# (test_cudrv: device 0, memory, copies, the allocator, dcc's modules
# loaded); cuBLASLt's calls as disc makes them (test_cublaslt, against a
# reference on the host; the library from the machine's PyTorch wheels;
# and on cuBLAS, DISC_CUBLAS_FALLBACK=1); cuDNN's the same way
# (test_cudnn, convolutions and pooling); the copy bandwidths of pageable,
# pinned and staged memory (copy_bw.c); then every model test on the GPU:
# each AOT object linked there with tests/aot/aot_check.c and the runtime
# archive, run on every data set, its outputs against ONNX Runtime's
# (device_compare.py), four of them again on disc's own GEMM and conv
# kernels (`_template`), and tests/gpu/gemm_mma.disc's f16 and bf16
# tensor-core kernels against the interpreter's outputs (disc_cases.py);
# then the
# BERT encoder under compute-sanitizer's memcheck and racecheck; then the
# benchmark (bench/gpu_bench.py run: disc against PyTorch eager and
# torch.compile, outputs checked against eager's). Logs and reports go
# to $OUT (the tool brings back at most 8 files: device.log, bench.log,
# bench/gpu_bench.md and .json and ncu's CSV, profile.log and
# profile/gpu_profile.md), programs and objects to $DISC_DEVICE_WORK
# (/tmp/disc-device-work); exit 0 only if all pass. The H200 of
# 2026-11-27 took 290 s for --tests then --bench --dtypes f32 in one
# command, 164 s for --bench --dtypes f16, 185 s for --profile and ncu.
set -eu
cd "$(dirname "$0")/../.."
dev=${DISC_DEVICE_DIR:-tests/gpu/device} # (another, for a rehearsal on the stand-in driver)
if [ "${1:-}" = --prepare ]; then
    rm -rf $dev
    mkdir -p $dev/models
    for arch in sm_80 sm_90; do
        build/dcc emit tests/gpu/loop_vec.disc --stage cubin --arch $arch -o $dev/loop_vec.$arch.cubin
    done
    build/dcc emit tests/gpu/loop_vec.disc --stage ptx --arch sm_80 -o $dev/loop_vec.sm_80.ptx
    for d in tests/models/*/; do
        [ -f $d/model.onnx ] && ls -d $d/test_data_set_* > /dev/null 2>&1 || continue
        n=$(basename $d)
        mkdir -p $dev/models/$n
        build/dcc compile $d/model.onnx --backend cuda --cpu x86-64-v3 --gpu-arch sm_80,sm_90 --name m \
            -o $dev/models/$n/m.o --emit-header $dev/models/$n/m.h
        python3 tests/gpu/device_prep.py $d $dev/models/$n
        case $n in bert_encoder|gpt_decoder|recommender|resnet_cnn)
            mkdir -p $dev/models/${n}_template
            DISC_CUBLASLT=0 DISC_CUDNN=0 build/dcc compile $d/model.onnx --backend cuda --cpu x86-64-v3 --gpu-arch sm_80,sm_90 \
                --name m -o $dev/models/${n}_template/m.o --emit-header $dev/models/${n}_template/m.h
            python3 tests/gpu/device_prep.py $d $dev/models/${n}_template ;;
        esac
    done
    # the GEMM template's f16 and bf16 tensor-core form (mma.sync) and its
    # implicit-GEMM convolutions, against the interpreter's outputs
    for f in tests/gpu/gemm_mma.disc; do
        n=$(basename $f .disc)_template
        mkdir -p $dev/models/$n
        DISC_CUBLASLT=0 DISC_CUDNN=0 build/dcc compile $f --backend cuda --cpu x86-64-v3 --gpu-arch sm_80,sm_90 \
            --name m -o $dev/models/$n/m.o --emit-header $dev/models/$n/m.h
        rm -rf $dev/cases && python3 tests/gpu/disc_cases.py build/dcc $f $dev/cases
        python3 tests/gpu/device_prep.py $dev/cases $dev/models/$n && rm -rf $dev/cases
    done
    cp build/public/libdisc_rt.a $dev/
    # oneDNN is not on the GPU machine: its entry points answer
    # dnnl_unimplemented (3), so a library call there fails with a message
    { echo "/* generated by run_on_device.sh --prepare: oneDNN's entry points, unimplemented */"
      nm -u $dev/libdisc_rt.a | awk '/ dnnl_/ {print "int " $2 "(void); int " $2 "(void) { return 3; }"}'
    } > $dev/no_dnnl_stubs.c
    python3 bench/gpu_bench.py prepare $dev/bench
    du -sh $dev
    exit 0
fi
what=all
case ${1:-} in
--tests) what=tests; shift ;;
--bench) what=bench; shift ;;
--profile) what=profile; shift ;;
esac
out=${OUT:-/tmp/disc-device}
# $out gets the logs and reports alone (the device tool brings back at
# most 8 files, two folders down); programs and objects go to $work
work=${DISC_DEVICE_WORK:-/tmp/disc-device-work}
mkdir -p "$out" "$work"
log="$out/device.log"
: > "$log"
say() { echo "$@" | tee -a "$log"; }
say "== $(date -u) $(uname -m)"
nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1 | tee -a "$log" || true
fail=0
# A CUDA library (the pattern of its file name): one on LD_LIBRARY_PATH
# (a rehearsal's stand-in), the toolkit's, else PyTorch's wheels
# (nvidia-cublas, nvidia-cudnn); its directory goes on LD_LIBRARY_PATH.
find_lib() {
    found=
    for d in $(echo "${LD_LIBRARY_PATH:-}" | tr ':' ' '); do
        [ -n "$found" ] || found=$(ls $d/$1 2>/dev/null | head -1)
    done
    [ -n "$found" ] || found=$(ldconfig -p 2>/dev/null | grep -o "/[^ ]*/$1\$" | head -1)
    [ -n "$found" ] || found=$(find /usr /opt /root /home -name "$1" 2>/dev/null | head -1)
    [ -z "$found" ] || export LD_LIBRARY_PATH="$(dirname "$found")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}
find_lib 'libcublasLt.so.1[23]'
if [ -n "$found" ]; then
    say "== cuBLASLt: $found"
else
    say "== no libcublasLt.so.12 or .13 on this machine: the models' matmuls will fail"
fi
# cuDNN (optional for disc; the model objects here were compiled for it
# where the compiling machine had it: then their convolutions need it)
find_lib 'libcudnn.so.[89]'
if [ -n "$found" ]; then
    say "== cuDNN: $found"
else
    say "== no libcudnn.so.9 or .8 on this machine: models compiled for cuDNN will fail their convolutions"
fi
if [ $what = profile ]; then
    say "== where the time goes (bench/gpu_bench.py profile $*)"
    python3 bench/gpu_bench.py profile $dev/bench --rtlib $dev/libdisc_rt.a --stubs $dev/no_dnnl_stubs.c \
        --out "$out/profile" --work "$work/profile" "$@" > "$out/profile.log" 2>&1 || fail=1
    cat "$out/profile.log" >> "$log"
    say "== profile: $([ $fail = 0 ] && echo done || echo FAIL)"
    exit $fail
fi
# each run's CUDA graph, captured or not kept and why, into the logs
export DISC_CUDA_GRAPHS_LOG=1
if [ $what != bench ]; then
cc -c -O1 -o "$work/no_dnnl_stubs.o" $dev/no_dnnl_stubs.c
cc -O1 -g -std=gnu11 -Iinclude -I. -o "$work/test_cudrv" tests/unit/test_cudrv.c $dev/libdisc_rt.a \
    "$work/no_dnnl_stubs.o" -ldl -lpthread -lm 2>&1 | tee -a "$log"
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.')
for m in "$dev/loop_vec.sm_$cap.cubin" "$dev/loop_vec.sm_80.ptx"; do
    [ -f "$m" ] || { say "missing $m (run --prepare here first)"; fail=1; continue; }
    say "== test_cudrv --module $m"
    "$work/test_cudrv" --module "$m" disc_k0 disc_k1 >> "$log" 2>&1 || fail=1
    tail -1 "$log"
done
cc -O1 -g -std=gnu11 -Iinclude -I. -o "$work/test_cublaslt" tests/unit/test_cublaslt.c $dev/libdisc_rt.a \
    "$work/no_dnnl_stubs.o" -ldl -lpthread -lm >> "$log" 2>&1 || { say "FAIL: cannot build test_cublaslt"; fail=1; }
say "== test_cublaslt"
"$work/test_cublaslt" >> "$log" 2>&1 || fail=1
tail -1 "$log"
cc -O1 -g -std=gnu11 -Iinclude -I. -o "$work/test_cudnn" tests/unit/test_cudnn.c $dev/libdisc_rt.a \
    "$work/no_dnnl_stubs.o" -ldl -lpthread -lm >> "$log" 2>&1 || { say "FAIL: cannot build test_cudnn"; fail=1; }
say "== test_cudnn"
"$work/test_cudnn" >> "$log" 2>&1 || fail=1
tail -1 "$log"
# copies from and to pageable memory against pinned (and staged through
# pinned chunks): whether disc_run's copies should stage (tests/gpu/copy_bw.c)
cc -O2 -std=gnu11 -o "$work/copy_bw" tests/gpu/copy_bw.c -ldl >> "$log" 2>&1 && "$work/copy_bw" >> "$log" 2>&1 || true
grep '^copy_bw' "$log" || true
# every model test on the GPU, ahead of time
npass=0
nfail=0
for md in $dev/models/*/; do
    n=$(basename $md)
    exe="$work/check_$n"
    if ! cc -O1 -I$md -I. -DAOT_DEVICE -DAOT_NAME=m -DAOT_UPPER=M '-DAOT_HEADER="m.h"' tests/aot/aot_check.c $md/m.o \
            $dev/libdisc_rt.a "$work/no_dnnl_stubs.o" -lm -lpthread -ldl -o "$exe" >> "$log" 2>&1; then
        say "FAIL $n: cannot link"
        nfail=$((nfail + 1))
        continue
    fi
    for s in $md/test_data_set_*/; do
        if "$exe" $s >> "$log" 2>&1 && python3 tests/gpu/device_compare.py $md/m.h m $s >> "$log" 2>&1; then
            npass=$((npass + 1))
        else
            nfail=$((nfail + 1))
            say "FAIL $n $(basename $s): $(tail -1 "$log")"
        fi
    done
done
say "== models on the GPU: $npass data sets pass, $nfail fail"
say "== cuda graphs in those runs: $(grep -c 'cuda graph captured' "$log") captured, $(grep -c 'cuda graph not kept' "$log") not kept"
grep 'cuda graph not kept' "$log" | sed 's/.*without): //' | sort | uniq -c | sort -rn | head -8 | tee -a "$log"
[ $nfail = 0 ] || fail=1
if command -v compute-sanitizer > /dev/null; then
    for tool in memcheck racecheck; do
        say "== compute-sanitizer $tool: test_cudrv, the BERT encoder"
        compute-sanitizer --tool $tool --error-exitcode 9 "$work/test_cudrv" --module "$dev/loop_vec.sm_80.ptx" \
            disc_k0 >> "$log" 2>&1 || fail=1
        s=$(ls -d $dev/models/bert_encoder/test_data_set_* | tail -1)
        compute-sanitizer --tool $tool --error-exitcode 9 "$work/check_bert_encoder" $s >> "$log" 2>&1 || fail=1
        tail -2 "$log"
    done
fi
fi
if [ $what != tests ]; then
    say "== the benchmark (bench/gpu_bench.py run $*)"
    python3 bench/gpu_bench.py run $dev/bench --rtlib $dev/libdisc_rt.a --stubs $dev/no_dnnl_stubs.c \
        --out "$out/bench" --work "$work/bench" "$@" > "$out/bench.log" 2>&1 || fail=1
    cat "$out/bench.log" >> "$log"
    tail -30 "$out/bench.log"
    [ -f "$out/bench/gpu_bench.md" ] && cat "$out/bench/gpu_bench.md"
fi
say "== device check: $([ $fail = 0 ] && echo PASS || echo FAIL)"
exit $fail
