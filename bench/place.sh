#!/usr/bin/env bash
# Offset placement benchmark: `aliasguard place` on the MiniMalloc traces A-K
# (bench/minimalloc), on synthetic traces of 10k, 100k and 1M buffers and,
# when gen_graph is built, on the arenas of `gen_graph --conflicts` graphs of
# 100k and 300k nodes (thousands of tensors alive to the end), printing
# arena, lower bound, their ratio, seconds and peak RSS, plus the ratio of
# greedy by size with best fit alone (--greedy) for comparison.
# usage: bench/place.sh BUILD_DIR [EFFORT_SECONDS]
set -euo pipefail
build=${1:?usage: bench/place.sh BUILD_DIR [EFFORT_SECONDS]}
effort=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
ag="$build/aliasguard"
[ -x "$ag" ] || { echo "place.sh: $ag not built" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
have_time=0
[ -x /usr/bin/time ] && have_time=1

# A synthetic trace in the shape of a network's activations: one or two
# buffers start per step; most die within a few steps, a few live long
# (skip connections); sizes 64 B to 1 MiB in multiples of 64.
gen() {
    awk -v n="$1" -v seed="$2" 'BEGIN {
        srand(seed); print "id,lower,upper,size"; step = 0
        for (i = 0; i < n; i++) {
            if (rand() < 0.6) step++
            r = rand()
            len = r < 0.85 ? 1 + int(rand() * 4) : (r < 0.98 ? 5 + int(rand() * 60) : 65 + int(rand() * 2000))
            size = 64 * (1 + int(2 ^ (rand() * 14)))
            printf "%d,%d,%d,%d\n", i, step, step + len, size
        }
    }'
}

run() { # name file [capacity] -> one row
    local name=$1 f=$2 out rss=0
    local cap=()
    [ -n "${3:-}" ] && cap=(--capacity "$3")
    if [ $have_time = 1 ]; then
        /usr/bin/time -f '%M' -o "$work/time" "$ag" place --json --effort "$effort" "${cap[@]}" "$f" >"$work/out"
        rss=$(tail -n 1 "$work/time")
    else
        "$ag" place --json --effort "$effort" "${cap[@]}" "$f" >"$work/out"
    fi
    out=$(cat "$work/out")
    local greedy
    greedy=$("$ag" place --json --greedy "$f")
    python3 - "$name" "$(wc -l <"$f")" "$out" "$greedy" "$rss" <<'PY'
import json, sys
name, lines, out, greedy, rss = sys.argv[1], int(sys.argv[2]) - 1, json.loads(sys.argv[3]), json.loads(sys.argv[4]), int(sys.argv[5])
lb = out["lower_bound_bytes"] or 1
print("%-10s %8d %12d %12d %8.4f %8.4f %9.3f %9.1f" % (name, lines, lb, out["arena_bytes"], out["arena_bytes"] / lb,
      greedy["arena_bytes"] / lb, out["seconds"], rss / 1024))
PY
}

printf '%-10s %8s %12s %12s %8s %8s %9s %9s\n' trace buffers lower_bound arena ratio greedy seconds rss_MiB
# MiniMalloc's traces carry their capacity in the name (A.1048576.csv): the
# question there is whether the trace fits it, so it is the search's target
# (a row per trace), then the same trace without a capacity (arena as low as
# the budget reaches).
for f in "$here"/minimalloc/[A-K].*.csv; do
    base=$(basename "$f" .csv)
    run "$base" "$f" "${base#*.}"
    run "${base%%.*}.nocap" "$f"
done
for n in 10000 100000 1000000; do
    gen "$n" 42 >"$work/syn_$n.csv"
    run "syn_$n" "$work/syn_$n.csv"
done

# Arenas of compiled graphs: many long-lived buffers alive with everything.
if [ -x "$build/gen_graph" ]; then
    for n in 100000 300000; do
        "$build/gen_graph" "$n" 1 --conflicts >"$work/conf_$n.agt"
        "$ag" plan --effort 0 --emit-csv "$work/conf_$n.csv" "$work/conf_$n.agt" >/dev/null
        run "conf_$n" "$work/conf_$n.csv"
    done
fi
