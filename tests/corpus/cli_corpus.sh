#!/bin/sh
# Runs `aliasguard convert` and `aliasguard info` on every cached model of the
# npm model corpus (bench/corpus.json, fetched by scripts/fetch-corpus) with
# its manifest input shapes and values; each must exit 0, convert must print a
# graph that converts again to the same bytes, and info must report no unknown shape (unknowns in branches that
# cannot run for the bound values are reported apart and allowed).
# Usage: cli_corpus.sh PATH/TO/aliasguard   (exit 77 = skipped: no corpus)
set -u
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
name=cli_corpus
. "$here/models.inc"

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0 ran=0
while read -r id shapes; do
    model="$cache/$id.onnx"
    [ -f "$model" ] || { echo "cli_corpus: $id not cached, skipped"; continue; }
    ran=$((ran + 1))
    # shellcheck disable=SC2086 # shapes holds several options on purpose
    if ! "$cli" convert $shapes -o "$out/$id.agt" "$model" 2>"$out/err"; then
        echo "FAIL: aliasguard convert $id (exit $?)"; cat "$out/err"; fail=1; continue
    fi
    if [ ! -s "$out/$id.agt" ]; then
        echo "FAIL: aliasguard convert $id printed nothing"; fail=1; continue
    fi
    # The text IR round trip through the command line: printing the printed
    # graph again must give the same bytes.
    if ! "$cli" convert "$out/$id.agt" -o "$out/$id.2.agt" 2>"$out/err" || ! cmp -s "$out/$id.agt" "$out/$id.2.agt"; then
        echo "FAIL: aliasguard convert $id.agt is not byte-identical to $id.agt"; cat "$out/err"; fail=1; continue
    fi
    # shellcheck disable=SC2086
    if ! "$cli" info $shapes "$model" >"$out/info" 2>"$out/err"; then
        echo "FAIL: aliasguard info $id (exit $?)"; cat "$out/err"; fail=1; continue
    fi
    if ! grep -q '^unknown shapes: 0$' "$out/info"; then
        echo "FAIL: aliasguard info $id: $(grep '^unknown shapes' "$out/info")"; fail=1; continue
    fi
    untaken=$(sed -n 's/^unknown in branches not taken: //p' "$out/info")
    echo "ok: $id ($(wc -l <"$out/$id.agt") lines of .agt, 0 unknown shapes, ${untaken:-0} in branches not taken)"
done <<EOF_LIST
$list
EOF_LIST
[ "$ran" -gt 0 ] || { echo "cli_corpus: no model cached: skipped"; exit 77; }
exit $fail
