#!/bin/sh
# Runs `aliasguard verify` on every cached model of the corpus (bench/corpus.json,
# fetched by scripts/fetch-corpus) with its manifest input shapes and values:
# the optimised plan, the plan without in-place merging and the naive plan
# (a buffer per symbol) must all verify clean (exit 0).
# Usage: verify_corpus.sh PATH/TO/aliasguard [SCHEDULES]   (exit 77 = skipped: no corpus)
set -u
cli=$1
schedules=${2:-16}
here=$(cd "$(dirname "$0")" && pwd)
name=verify_corpus
. "$here/models.inc"

fail=0 ran=0
while read -r id shapes; do
    model="$cache/$id.onnx"
    [ -f "$model" ] || { echo "verify_corpus: $id not cached, skipped"; continue; }
    ran=$((ran + 1))
    for mode in "" "--no-inplace" "--no-inplace --naive"; do
        # shellcheck disable=SC2086 # shapes and mode hold several options on purpose
        if ! res=$("$cli" verify --schedules "$schedules" $mode $shapes "$model" 2>&1); then
            echo "FAIL: aliasguard verify $mode $id"; echo "$res"; fail=1
        fi
    done
done <<EOF2
$list
EOF2
[ "$ran" -gt 0 ] || { echo "verify_corpus: no model cached: skipped"; exit 77; }
echo "verify_corpus: $ran models, 3 plans each: $( [ $fail = 0 ] && echo clean || echo FAILED )"
exit $fail
