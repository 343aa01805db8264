#!/bin/sh
# Verifier throughput (docs/verify.md): schedules per second of `aliasguard
# verify` on a synthetic 10,000-node graph (bench/gen_graph.c) and on every
# cached corpus model (bench/corpus.json), 1,000 schedules on 4 streams each;
# every model must verify clean.  Wall time includes compiling and planning;
# the schedules' own rate is computed from the JSON report's seconds.
# usage: bench/verify.sh BUILD_DIR [SCHEDULES]
set -u
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
n=${2:-1000}
ag="$build/aliasguard"
gen="$build/gen_graph"
cache="${AG_CORPUS_DIR:-$HOME/.cache/aliasguard/corpus}"
for tool in "$ag" "$gen"; do
    [ -x "$tool" ] || { echo "bench: $tool not built (cmake --build $build --target aliasguard_cli gen_graph)" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== verify: $n schedules on 4 streams (one core) =="
printf "%-24s %8s %10s %12s %8s\n" graph nodes verify_s schedules/s result
row() { # name nodes file options...
    name=$1 nodes=$2 file=$3
    shift 3
    # shellcheck disable=SC2068 # options are split on purpose
    "$ag" verify --json --schedules "$n" --streams 4 $@ "$file" >"$tmp/out.json" 2>"$tmp/err"
    rc=$?
    if [ $rc -gt 1 ]; then
        echo "bench: verify $name failed:" >&2; cat "$tmp/err" >&2; return
    fi
    python3 - "$tmp/out.json" "$name" "$nodes" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["seconds"]
print("%-24s %8s %10.2f %12.1f %8s" % (sys.argv[2], sys.argv[3], s, r["schedules"] / s if s else 0.0,
                                       "clean" if r["clean"] else "%d viol." % len(r["violations"])))
PY
}
"$gen" 10000 1 >"$tmp/g10k.agt"
row synthetic_10k 10000 "$tmp/g10k.agt"
if [ -d "$cache" ]; then
    python3 - "$src/bench/corpus.json" >"$tmp/list" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    inputs = m.get("inputs", {})
    opts = ["--input-shape=%s=%s" % (k, ",".join(str(d) for d in v["dims"])) for k, v in inputs.items()]
    opts += ["--input-value=%s=%s" % (k, v["value"]) for k, v in inputs.items() if "value" in v]
    print(" ".join([m["id"]] + opts))
PY
    while read -r id shapes; do
        [ -f "$cache/$id.onnx" ] || continue
        nodes=$("$ag" info $shapes "$cache/$id.onnx" 2>/dev/null | sed -n 's/^nodes: *\([0-9]*\).*/\1/p' | head -1)
        # shellcheck disable=SC2086
        row "$id" "${nodes:-?}" "$cache/$id.onnx" $shapes
    done <"$tmp/list"
else
    echo "(no corpus in $cache: scripts/fetch-corpus)"
fi
