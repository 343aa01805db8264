#!/bin/sh
# The whole compile pipeline is idempotent: for every .agt input of the pass
# tests, the bundled example and every cached corpus model, `opt --passes=all`
# then `check` on its output must find nothing more (0 isolations, exit 0).
# Inputs that are meant to be rejected (bad graphs) are skipped when `opt`
# exits 2.  Usage: pipeline_idempotent.sh PATH/TO/aliasguard
set -u
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
root="$here/../.."
cache="${AG_CORPUS_DIR:-$HOME/.cache/aliasguard/corpus}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ran=0 fail=0
check_one() { # label input [options...]
    label=$1; shift
    "$cli" opt --passes=all "$@" -o "$out/once.agt" 2>"$out/err"
    rc=$?
    if [ $rc -eq 2 ]; then return 0; fi  # an input the tests expect to be rejected
    ran=$((ran + 1))
    if [ $rc -ne 0 ]; then echo "FAIL: opt $label (exit $rc): $(cat "$out/err")"; fail=$((fail + 1)); return 0; fi
    if ! "$cli" check --explain "$out/once.agt" >"$out/check" 2>"$out/err"; then
        echo "FAIL: $label: the pipeline changes its own output again:"; grep -E '^(isolation|warning):' "$out/check"; cat "$out/err"
        fail=$((fail + 1))
    fi
}
for f in $(find "$root/tests/lit/passes" -name '*.agt' ! -path '*/Inputs/*' | sort) "$root/examples/train_step.agt"; do
    check_one "${f#"$root"/}" "$f"
done
if [ -d "$cache" ] && command -v python3 >/dev/null 2>&1; then
    python3 - "$root/bench/corpus.json" >"$out/list" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    inputs = m.get("inputs", {})
    opts = ["--input-shape=%s=%s" % (k, ",".join(str(d) for d in v["dims"])) for k, v in inputs.items()]
    opts += ["--input-value=%s=%s" % (k, v["value"]) for k, v in inputs.items() if "value" in v]
    print(" ".join([m["id"]] + opts))
PY
    while read -r id opts; do
        [ -f "$cache/$id.onnx" ] || continue
        # shellcheck disable=SC2086 # opts holds several options on purpose
        check_one "$id" "$cache/$id.onnx" $opts
    done <"$out/list"
fi
echo "pipeline idempotence: $ran inputs, $fail failed"
[ "$ran" -gt 0 ] || exit 77
[ "$fail" -eq 0 ]
