#!/bin/sh
# Runs `aliasguard plan` on every cached model of the corpus (bench/corpus.json,
# fetched by scripts/fetch-corpus) with its manifest input shapes and values,
# with in-place merging off and on; each must exit 0 (the plan passed the
# checker) and the lines printed per model give the arena size against its
# lower bound in each mode.  AG_PLAN_CORPUS_OPS=FILE adds an ops file (e.g.
# one marking elementwise ops `out0=inplace:0`) to every run.
# Usage: plan_corpus.sh PATH/TO/aliasguard   (exit 77 = skipped: no corpus)
set -u
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
name=plan_corpus
. "$here/models.inc"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0 ran=0
while read -r id shapes; do
    model="$cache/$id.onnx"
    [ -f "$model" ] || { echo "plan_corpus: $id not cached, skipped"; continue; }
    ran=$((ran + 1))
    for mode in --no-inplace --inplace; do
        # The default is in-place on; --no-inplace turns it off.
        flag=$mode
        [ "$mode" = --inplace ] && flag=
        # shellcheck disable=SC2086 # shapes and flag hold options on purpose
        if ! "$cli" plan $flag ${AG_PLAN_CORPUS_OPS:+--ops "$AG_PLAN_CORPUS_OPS"} $shapes "$model" \
            >"$out/plan" 2>"$out/err"; then
            echo "FAIL: aliasguard plan $mode $id"; cat "$out/err"; fail=1; continue
        fi
        merges=$(sed -n 's/.*in-place: \([0-9]*\)$/\1/p' "$out/plan")
        echo "ok: $id $mode: $(sed -n 's/^peak: //p' "$out/plan"), in-place merges ${merges:-0}"
    done
done <<EOF_LIST
$list
EOF_LIST
[ "$ran" -gt 0 ] || { echo "plan_corpus: no cached model: skipped"; exit 77; }
exit $fail
