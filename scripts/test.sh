#!/bin/sh
# The whole test suite, as the README's second command runs it:
#   1. install missing dependencies and fetch the model corpus (cached);
#   2. build and run every test (unit, lit, fuzz replay, corpus) in a normal build;
#   3. the same under AddressSanitizer + UndefinedBehaviorSanitizer with expensive asserts;
#   4. the runtime and kernel-mode tests (threads) under ThreadSanitizer;
#   5. libFuzzer smoke runs of every fuzz target (clang).
# Prints one closing line "N passed, N failed" over all suites; exit 0 only if all pass.
set -u
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
scripts/install-deps || exit 1
scripts/fetch-corpus || { echo "test.sh: corpus fetch failed"; exit 1; }

passed=0
failed=0
run_ctest() { # name build-dir ctest-args...
    name=$1; dir=$2; shift 2
    log="$dir/ctest.log"
    ctest --test-dir "$dir" --output-on-failure -j "$JOBS" "$@" >"$log" 2>&1
    rc=$?
    cat "$log"
    p=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2 \1/p' "$log" | tail -1)
    if [ -n "$p" ]; then
        total=${p% *}; nfail=${p#* }
        passed=$((passed + total - nfail)); failed=$((failed + nfail))
    else
        failed=$((failed + 1))
    fi
    [ $rc -eq 0 ] || echo "test.sh: $name: failures above"
}
build() { # dir cmake-args...   (TARGETS="a b" limits what is built)
    dir=$1; shift
    targets=""
    for t in ${TARGETS:-}; do targets="$targets --target $t"; done
    mkdir -p "$dir"
    { cmake -S . -B "$dir" "$@" && cmake --build "$dir" -j "$JOBS" $targets; } >"$dir/build.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$dir/build.log"; echo "test.sh: build $dir failed"; failed=$((failed + 1)); }
    return $rc
}

if build build -DCMAKE_BUILD_TYPE=RelWithDebInfo; then
    run_ctest release build
fi
if build build-asan -DCMAKE_BUILD_TYPE=Debug -DAG_SANITIZE=address,undefined -DAG_DEBUG_LEVEL=3; then
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
        run_ctest asan build-asan
fi
rt_tests=$(ls tests/unit/test_rt_*.c tests/unit/test_kernel_*.c examples/*.c 2>/dev/null |
    sed 's|^examples/|example_|; s|.*/||; s|\.c$||' | tr '\n' ' ')
if TARGETS="$rt_tests" build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAG_SANITIZE=thread; then
    TSAN_OPTIONS=halt_on_error=1 run_ctest tsan build-tsan -R '^(rt_|kernel_|example_)'
fi
fuzzers=$(ls tests/fuzz/fuzz_*.c 2>/dev/null | sed 's|.*/||; s|\.c$||' | tr '\n' ' ')
if TARGETS="$fuzzers" build build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAG_FUZZ=ON; then
    run_ctest fuzz build-fuzz -R '^fuzz_smoke\.'
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
