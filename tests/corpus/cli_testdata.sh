#!/bin/sh
# Runs the command line over every model of Debian's libonnx-testdata (the
# ONNX 1.12 backend test suite): `convert` then `info` must succeed on every
# tensor-only model, converting the printed .agt again must give the same
# bytes, and every refusal must be exit 2 with an "is not supported" message
# naming the value or node (sequence and optional types).  Prints the counts.
# Usage: cli_testdata.sh PATH/TO/aliasguard   (exit 77 = skipped: no testdata)
set -u
cli=$1
data=${AG_TESTDATA_DIR:-/usr/share/libonnx-testdata/data}
[ -d "$data" ] || { echo "cli_testdata: $data missing (Debian libonnx-testdata): skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
total=0 loaded=0 refused=0 fail=0
for model in "$data"/*/*/model.onnx; do
    total=$((total + 1))
    name=${model#"$data"/}
    "$cli" convert "$model" -o "$out/a.agt" 2>"$out/err"
    rc=$?
    if [ $rc -eq 2 ] && grep -q "is not supported" "$out/err"; then
        refused=$((refused + 1))
        continue
    fi
    if [ $rc -ne 0 ]; then
        echo "FAIL: convert $name (exit $rc): $(cat "$out/err")"; fail=$((fail + 1)); continue
    fi
    if ! "$cli" convert "$out/a.agt" -o "$out/b.agt" 2>"$out/err" || ! cmp -s "$out/a.agt" "$out/b.agt"; then
        echo "FAIL: $name: .agt does not convert to the same bytes $(cat "$out/err")"; fail=$((fail + 1)); continue
    fi
    if ! "$cli" info "$model" >/dev/null 2>"$out/err"; then
        echo "FAIL: info $name: $(cat "$out/err")"; fail=$((fail + 1)); continue
    fi
    loaded=$((loaded + 1))
done
echo "libonnx-testdata through the CLI: $total models, $loaded loaded, $refused refused as unsupported, $fail failed"
[ "$total" -gt 0 ] || exit 77
[ "$fail" -eq 0 ]
