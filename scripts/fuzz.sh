#!/bin/sh
# fuzz.sh BUILD SECONDS [TARGET...] — runs the libFuzzer targets built in
# BUILD (make fuzz) for SECONDS each (default targets: onnx ir weights
# shapes), from their seed corpora (the same as ctest's replays) and
# dictionaries, under ASan and UBSan. Prints the executions and coverage
# each run reached. A crash input is copied to tests/fuzz/regress/TARGET/,
# where ctest replays it from then on, and the script fails.
set -u
build=$1
secs=$2
shift 2
targets=${*:-"onnx ir weights shapes"}
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
for t in $targets; do
    case $t in
    onnx) seeds="$root/tests/onnx/models"; dict="-dict=$root/tests/fuzz/onnx.dict" ;;
    ir) seeds="$root/tests/golden/ir $root/tests/interp"; dict="-dict=$root/tests/fuzz/ir.dict" ;;
    weights) seeds="$root/tests/fuzz/corpus/weights"; dict="" ;;
    shapes) seeds="$root/tests/fuzz/corpus/shapes"; dict="" ;;
    *) echo "fuzz.sh: unknown target $t (onnx, ir, weights, shapes)" >&2; exit 2 ;;
    esac
    work="$build/fuzz-corpus/$t"
    crashes="$build/fuzz-crashes/$t"
    rm -rf "$crashes"
    mkdir -p "$work" "$crashes"
    log="$build/fuzz-$t.log"
    # shellcheck disable=SC2086
    ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
        "$build/fuzz_$t" -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
        $dict -artifact_prefix="$crashes/" "$work" $seeds >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1)
    # what libFuzzer writes there: crash-, leak-, timeout-, oom- inputs,
    # and slow-unit- ones (a run over 10 s, on a loaded machine too: not
    # a failure, and not kept)
    find "$crashes" -type f -name 'slow-unit-*' -delete
    found=$(find "$crashes" -type f | wc -l)
    echo "fuzz $t: ${secs} s, ${execs:-?} executions, ${cov:-no coverage line}, corpus $(find "$work" -type f | wc -l) inputs, $found crash inputs"
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
        status=1
        mkdir -p "$root/tests/fuzz/regress/$t"
        find "$crashes" -type f -exec cp {} "$root/tests/fuzz/regress/$t/" \;
        echo "fuzz $t: FAILED (exit $rc); the inputs are in tests/fuzz/regress/$t/, the log in $log:" >&2
        grep -A 30 "ERROR\|runtime error\|deadly signal" "$log" | head -60 >&2
    fi
done
exit $status
