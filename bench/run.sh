#!/usr/bin/env bash
# Import + inference benchmark: runs `aliasguard info --stats` on synthetic
# .agt graphs of growing size (bench/gen_graph.c) and on the largest models of
# the corpus, and prints wall time, peak RSS and the cost per node, so that
# linear growth (a flat us/node column) can be checked at a glance.
#
# usage: bench/run.sh BUILD_DIR
# environment:
#   AG_BENCH_SIZES       node counts of the synthetic graphs (default "10000 100000 1000000")
#   AG_BENCH_DIR         where generated graphs are kept (default BUILD_DIR/bench-data)
#   AG_BENCH_REPEAT      runs per input, the fastest is reported (default 3)
#   AG_BENCH_CORPUS_TOP  how many of the largest corpus models to run (default 5)
#   AG_BENCH_LINT_SIZES  node counts of the lint graphs (default "100000 1000000")
#   AG_CORPUS_DIR        corpus cache (default $HOME/.cache/aliasguard/corpus)
#   AG_BENCH_ORT         1: also compare with ONNX Runtime's memory pattern (bench/ort.sh)
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
ag="$build/aliasguard"
gen="$build/gen_graph"
data="${AG_BENCH_DIR:-$build/bench-data}"
sizes="${AG_BENCH_SIZES:-10000 100000 1000000}"
repeat="${AG_BENCH_REPEAT:-3}"
corpus_dir="${AG_CORPUS_DIR:-$HOME/.cache/aliasguard/corpus}"
corpus_top="${AG_BENCH_CORPUS_TOP:-5}"

for tool in "$ag" "$gen"; do
    if [ ! -x "$tool" ]; then
        echo "bench: $tool not built (cmake --build $build --target aliasguard_cli gen_graph)" >&2
        exit 2
    fi
done
mkdir -p "$data"

have_time=0
if [ -x /usr/bin/time ]; then
    have_time=1
else
    echo "note: /usr/bin/time not found (Debian package 'time'): peak RSS comes from --stats only" >&2
fi

# measure LABEL FILE [info options...]: runs info $repeat times, keeps the
# fastest run, and appends one row to $rows.
rows=$(mktemp)
trap 'rm -f "$rows" "$rows".*' EXIT
measure() {
    local label=$1 file=$2
    shift 2
    local best_wall="" best_line="" k
    for ((k = 0; k < repeat; k++)); do
        local out="$rows.out" tim="$rows.time" wall rss t0 t1
        # Wall time from the nanosecond clock (/usr/bin/time rounds to 10 ms),
        # peak RSS from /usr/bin/time, else from info --stats.
        t0=$(date +%s%N)
        if [ $have_time = 1 ]; then
            /usr/bin/time -f '%M' -o "$tim" "$ag" info --stats --limit 1 "$@" "$file" >"$out" 2>"$rows.err" || t0=""
        else
            "$ag" info --stats --limit 1 "$@" "$file" >"$out" 2>"$rows.err" || t0=""
        fi
        t1=$(date +%s%N)
        if [ -z "$t0" ]; then
            echo "bench: $label: aliasguard info failed:" >&2
            cat "$rows.err" >&2
            return 0
        fi
        wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
        if [ $have_time = 1 ]; then
            rss=$(tail -n 1 "$tim")
        else
            rss=$(sed -n 's/.*peak rss \([0-9]*\) KiB.*/\1/p' "$out")
        fi
        if [ -z "$best_wall" ] || awk -v a="$wall" -v b="$best_wall" 'BEGIN { exit !(a < b) }'; then
            best_wall=$wall
            local nodes load infer
            nodes=$(sed -n 's/^nodes: \([0-9]*\)$/\1/p' "$out")
            load=$(sed -n 's/^stats: load \([0-9.]*\) ms.*/\1/p' "$out")
            infer=$(sed -n 's/^stats: .*, infer \([0-9.]*\) ms.*/\1/p' "$out")
            best_line="$label $nodes $wall $rss ${load:--} ${infer:--}"
        fi
    done
    echo "$best_line" >>"$rows"
}

echo "== synthetic graphs (bench/gen_graph) =="
for n in $sizes; do
    f="$data/synthetic_$n.agt"
    if [ ! -s "$f" ] || [ "$gen" -nt "$f" ]; then
        "$gen" "$n" >"$f.tmp"
        mv "$f.tmp" "$f"
    fi
    echo "generated $f ($(du -h "$f" | cut -f1))"
    measure "synthetic_$n" "$f"
done

echo "== corpus models =="
manifest="$src/bench/corpus.json"
# The manifest's input bindings of model $1, as command-line words.
model_binds() {
    python3 - "$manifest" "$1" <<'EOF'
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    if m["id"] == sys.argv[2]:
        ins = m.get("inputs", {}).items()
        print(" ".join(["--input-shape=%s=%s" % (n, ",".join(str(d) for d in s.get("dims", []))) for n, s in ins] +
                       ["--input-value=%s=%s" % (n, s["value"]) for n, s in ins if "value" in s]))
EOF
}
if [ ! -f "$manifest" ]; then
    echo "note: $manifest not found: corpus models skipped"
elif ! command -v python3 >/dev/null; then
    echo "note: python3 not found: corpus models skipped"
else
    # One line per model present in the cache, largest first: ID PATH
    python3 - "$manifest" "$corpus_dir" "$corpus_top" >"$rows.models" <<'EOF'
import json, os, sys
manifest, cache, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
models = json.load(open(manifest))["models"]
present = []
for m in models:
    path = os.path.join(cache, m["id"] + ".onnx")
    if not os.path.isfile(path):
        print("note: %s not in %s: skipped" % (m["id"], cache), file=sys.stderr)
        continue
    present.append((os.path.getsize(path), m["id"], path))
present.sort(reverse=True)
for size, mid, path in present[:top]:
    print(mid, path)
EOF
    while read -r id path; do
        # shellcheck disable=SC2046 # bindings are separate words
        measure "$id" "$path" $(model_binds "$id")
    done <"$rows.models"
fi

echo
echo "== aliasguard info --stats: fastest of $repeat runs =="
awk 'BEGIN {
    printf "%-22s %10s %8s %9s %8s %10s %10s %8s\n", "input", "nodes", "wall s", "rss MiB", "us/node",
           "load ms", "infer ms", "us/node"
    printf "%-22s %10s %8s %9s %8s %10s %10s %8s\n", "", "", "", "", "(wall)", "", "", "(l+i)"
}
{
    us = ($2 > 0) ? $3 * 1e6 / $2 : 0
    li = ($2 > 0 && $5 != "-") ? ($5 + ($6 != "-" ? $6 : 0)) * 1e3 / $2 : 0
    printf "%-22s %10d %8.3f %9.1f %8.2f %10s %10s %8.2f\n", $1, $2, $3, $4 / 1024, us, $5, $6, li
}' "$rows"

# ---- compile pipeline: `opt --passes=all` minus `info` on graphs with conflicts ----
# gen_graph --conflicts adds an in-place collective on a shared activation
# every 5 blocks and a While whose body holds an If (two levels of
# subgraphs) every 50; the difference of the fastest `opt --passes=all` and
# the fastest `info` runs is the time of the pass pipeline itself (`check`
# also plans memory, which is measured apart: bench/place.sh, docs/plan.md).
fastest() { # command...: prints "wall_s rss_kib" of the fastest of $repeat runs
    local best="" k t0 t1 wall rss
    for ((k = 0; k < repeat; k++)); do
        t0=$(date +%s%N)
        if [ $have_time = 1 ]; then
            # check exits 1 when it reports isolations: that is its result, not a failure
            /usr/bin/time -f '%M' -o "$rows.time" "$@" >/dev/null 2>"$rows.err" || true
            rss=$(tail -n 1 "$rows.time")
        else
            "$@" >/dev/null 2>"$rows.err" || true
            rss=0
        fi
        t1=$(date +%s%N)
        wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
        if [ -z "$best" ] || awk -v a="$wall" -v b="${best% *}" 'BEGIN { exit !(a < b) }'; then
            best="$wall $rss"
        fi
    done
    echo "$best"
}
echo
echo "== compile pipeline (aliasguard opt --passes=all on gen_graph --conflicts): fastest of $repeat runs =="
printf "%-22s %10s %10s %10s %12s %9s %10s\n" "input" "nodes" "info s" "opt s" "pipeline s" "rss MiB" "us/node"
for n in $sizes; do
    f="$data/conflicts_$n.agt"
    if [ ! -s "$f" ] || [ "$gen" -nt "$f" ]; then
        "$gen" "$n" 1 --conflicts >"$f.tmp"
        mv "$f.tmp" "$f"
    fi
    read -r info_s _ < <(fastest "$ag" info --limit 1 "$f")
    read -r check_s check_rss < <(fastest "$ag" opt --passes=all "$f" -o /dev/null)
    awk -v name="conflicts_$n" -v n="$n" -v i="$info_s" -v c="$check_s" -v r="$check_rss" 'BEGIN {
        p = c - i
        printf "%-22s %10d %10.3f %10.3f %12.3f %9.1f %10.2f\n", name, n, i, c, p, r / 1024, p * 1e6 / n
    }'
done

# ---- lint: `opt --passes=lint` on graphs with shared, written outputs ----
# gen_graph --lint: a tenth of all outputs are shared by an Assign and a
# reader (a third of them unordered, so lint reports them), plus one
# variable written and read across the whole graph; gen_graph --train: a
# training step whose weights are read early, read again late and written
# last (every pair ordered, long-range).  "lint ms" is the pass alone
# (--time-passes), the wall time and peak RSS are the whole process.
lint_sizes="${AG_BENCH_LINT_SIZES:-100000 1000000}"
echo
echo "== lint (aliasguard opt --passes=lint --time-passes): fastest of $repeat runs =="
printf "%-22s %10s %10s %10s %9s %10s\n" "input" "nodes" "wall s" "lint ms" "rss MiB" "warnings"
for mode in lint train; do
    for n in $lint_sizes; do
        f="$data/${mode}_$n.agt"
        if [ ! -s "$f" ] || [ "$gen" -nt "$f" ]; then
            "$gen" "$n" 1 "--$mode" >"$f.tmp"
            mv "$f.tmp" "$f"
        fi
        best="" best_ms="" best_rss=""
        for ((k = 0; k < repeat; k++)); do
            t0=$(date +%s%N)
            if [ $have_time = 1 ]; then
                /usr/bin/time -f '%M' -o "$rows.time" "$ag" opt --passes=lint --time-passes --explain "$f" \
                    -o "$rows.lint" 2>"$rows.err" || true
                rss=$(tail -n 1 "$rows.time")
            else
                "$ag" opt --passes=lint --time-passes --explain "$f" -o "$rows.lint" 2>"$rows.err" || true
                rss=0
            fi
            t1=$(date +%s%N)
            wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
            ms=$(sed -n 's/^time: pass=lint ms=\([0-9.]*\)$/\1/p' "$rows.err")
            if [ -z "$ms" ]; then
                echo "bench: lint on $f failed:" >&2
                cat "$rows.err" >&2
                break
            fi
            if [ -z "$best" ] || awk -v a="$wall" -v b="$best" 'BEGIN { exit !(a < b) }'; then
                best=$wall best_ms=$ms best_rss=$rss
            fi
        done
        [ -n "$best" ] || continue
        warns=$(grep -c '^# warning: pass=lint ' "$rows.lint" || true)
        awk -v name="${mode}_$n" -v n="$n" -v w="$best" -v ms="$best_ms" -v r="$best_rss" -v c="$warns" 'BEGIN {
            printf "%-22s %10d %10.3f %10.1f %9.1f %10d\n", name, n, w, ms, r / 1024, c
        }'
    done
done

# ---- optional: ONNX Runtime's memory pattern next to `aliasguard plan` ----
# (AG_BENCH_ORT=1; needs node, and npm plus the registry on first use: bench/ort.sh)
if [ "${AG_BENCH_ORT:-0}" = 1 ]; then
    echo
    "$src/bench/ort.sh" "$build"
fi

# Offset placement (MiniMalloc traces and synthetic traces): bench/place.sh.
echo
"$(dirname "$0")/place.sh" "$1"

# Verifier schedules per second (10k-node graph and the corpus): bench/verify.sh.
echo
"$(dirname "$0")/verify.sh" "$1"

# ---- allocator: cached pair vs glibc malloc; multi-stream traces, multi vs baseline ----
if [ -x "$build/alloc" ]; then
    echo
    echo "allocator (bench/alloc.c)"
    "$build/alloc" pair
    mkdir -p "$data"
    # Each trace on an idle device (ticks 0) and busy ones (kernels of 4 and
    # 8 host operations), where polled events are not yet complete.
    traces=()
    for n in 4 8; do
        "$build/alloc" synth 1 20000 $n > "$data/alloc_synth$n.trace"
        traces+=("$data/alloc_synth$n.trace")
    done
    # Model traces with the inputs bound as the manifest says (a dynamic
    # dimension left open would leave tensors of unknown size, which the
    # plan refuses).
    for m in isnet_fp16 ppocr_v4_det lk_turn_detector oww_embedding; do
        f="$corpus_dir/$m.onnx"
        if [ ! -f "$f" ] || [ ! -f "$manifest" ] || ! command -v python3 >/dev/null; then
            continue
        fi
        # shellcheck disable=SC2046 # bindings are separate words
        "$build/alloc" model "$f" 4 $(model_binds "$m") > "$data/alloc_$m.trace" && traces+=("$data/alloc_$m.trace")
    done
    # Once, and as ten executions in a row with one allocator (the steady
    # state a runtime reaches; synthetic traces are long and run once).
    for t in "${traces[@]}"; do
        for ticks in 0 4 8; do
            "$build/alloc" compare "$t" $ticks
            case $t in
            *alloc_synth*) ;;
            *) "$build/alloc" compare "$t" $ticks 10 ;;
            esac
        done
    done
    # How both modes grow with the stream count (a MIF row takes more than
    # one word beyond 64 streams).
    for n in 16 32 64 128 256; do
        "$build/alloc" synth 1 20000 $n > "$data/alloc_synth$n.trace"
        for ticks in 0 8; do
            "$build/alloc" compare "$data/alloc_synth$n.trace" $ticks
        done
    done
fi

# ---- kernel mode: prepare miss vs memcpy, prepare hit, launch and replay overhead ----
if [ -x "$build/kernel" ]; then
    echo
    echo "kernel mode (bench/kernel.c)"
    "$build/kernel" "${AG_BENCH_KERNEL_LAUNCHES:-100000}"
fi
