#!/usr/bin/env bash
# Side-by-side of aliasguard's memory plan and ONNX Runtime's memory pattern
# on the corpus: installs onnxruntime-node into a cache outside the tree,
# measures ORT's planned activation block per model (bench/ort/ort_memory.js)
# and, given a build dir whose CLI has `plan`, prints both next to each other.
#
# usage: bench/ort.sh [BUILD_DIR]
# environment:
#   AG_ORT_DIR      where onnxruntime-node is installed (default $HOME/.cache/aliasguard/ort)
#   AG_CORPUS_DIR   corpus cache (default $HOME/.cache/aliasguard/corpus)
#   AG_ORT_MODELS   space-separated model ids to run (default: every cached model)
# Skips with a note (exit 0) when node, npm, the registry or the corpus is missing.
set -euo pipefail

if [ $# -gt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
    echo "usage: $0 [BUILD_DIR]" >&2
    exit 2
fi
src=$(cd "$(dirname "$0")/.." && pwd)
ort_dir="${AG_ORT_DIR:-$HOME/.cache/aliasguard/ort}"
corpus_dir="${AG_CORPUS_DIR:-$HOME/.cache/aliasguard/corpus}"
manifest="$src/bench/corpus.json"
ag=""
if [ $# -eq 1 ]; then
    ag="$(cd "$1" && pwd)/aliasguard"
    if [ ! -x "$ag" ]; then
        echo "bench/ort: $ag not built (cmake --build $1 --target aliasguard_cli)" >&2
        exit 2
    fi
fi

# The telemetry of ORT's Linux build writes under $HOME and $TMPDIR and tries
# to upload unless this is set before the first session.
export ORT_DISABLE_TELEMETRY=1

skip() {
    echo "note: ORT comparison skipped: $*"
    exit 0
}
command -v node >/dev/null || skip "node not found"
[ -d "$corpus_dir" ] || skip "no corpus in $corpus_dir (fetch it first, see bench/README.md)"

# ---- install onnxruntime-node (CPU build inside the npm tarball) ----
# ONNXRUNTIME_NODE_INSTALL=skip: the package's postinstall would otherwise
# download the CUDA provider libraries from another host; the CPU EP needs none.
mkdir -p "$ort_dir"
pkg_changed=0
for f in package.json; do
    if [ -f "$src/bench/ort/$f" ] && ! cmp -s "$src/bench/ort/$f" "$ort_dir/$f"; then
        cp "$src/bench/ort/$f" "$ort_dir/$f"
        pkg_changed=1
    fi
done
ort_loads() {
    (cd "$ort_dir" && node -e "require('onnxruntime-node')" >/dev/null 2>&1)
}
if [ $pkg_changed = 1 ] || ! ort_loads; then
    command -v npm >/dev/null || skip "npm not found (needed once to install onnxruntime-node into $ort_dir)"
    echo "installing onnxruntime-node into $ort_dir ..."
    if ! (cd "$ort_dir" && ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund >"$ort_dir/npm-install.log" 2>&1); then
        tail -n 5 "$ort_dir/npm-install.log" >&2
        skip "npm install failed (registry unreachable?); log in $ort_dir/npm-install.log"
    fi
    ort_loads || skip "onnxruntime-node does not load from $ort_dir (see $ort_dir/npm-install.log)"
fi

# ---- measure ----
results="$ort_dir/results.jsonl"
# shellcheck disable=SC2086 # model ids are separate words
if ! node "$src/bench/ort/ort_memory.js" --ort-dir "$ort_dir" "$manifest" "$corpus_dir" ${AG_ORT_MODELS:-} >"$results"; then
    echo "bench/ort: some models failed under ONNX Runtime (see the 'how' field below)" >&2
fi
[ -s "$results" ] || skip "no corpus model found in $corpus_dir"

have_plan=0
if [ -n "$ag" ]; then
    if "$ag" plan --help >/dev/null 2>&1; then
        have_plan=1
    else
        echo "note: $ag has no 'plan' command: ORT figures only"
    fi
fi

# ---- table ----
AG_CLI="$ag" AG_HAVE_PLAN=$have_plan node - "$manifest" "$corpus_dir" "$results" <<'EOF'
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const [manifestPath, corpusDir, resultsPath] = process.argv.slice(2);
const models = new Map(JSON.parse(fs.readFileSync(manifestPath, 'utf8')).models.map((m) => [m.id, m]));
const rows = fs.readFileSync(resultsPath, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const withPlan = process.env.AG_HAVE_PLAN === '1';

const human = (b) => {
    if (b === null || b === undefined) return '-';
    if (b < 1024) return `${b} B`;
    if (b < 1048576) return `${(b / 1024).toFixed(1)} KiB`;
    return `${(b / 1048576).toFixed(1)} MiB`;
};

// Same bindings as bench/run.sh gives `info`: the manifest's shapes and values.
function plan(m) {
    const args = ['plan', path.join(corpusDir, `${m.id}.onnx`), '--json', '--align', '64'];
    for (const [name, spec] of Object.entries(m.inputs || {})) {
        args.push(`--input-shape=${name}=${(spec.dims || []).join(',')}`);
        if (spec.value !== undefined) args.push(`--input-value=${name}=${spec.value}`);
    }
    const r = spawnSync(process.env.AG_CLI, args, { encoding: 'utf8', maxBuffer: 1 << 30 });
    let j = null;
    try {
        j = JSON.parse(r.stdout);
    } catch (e) {
        const why = (r.stderr || '').trim().split('\n')[0] || `exit ${r.status}`;
        process.stderr.write(`bench/ort: aliasguard plan ${m.id}: ${why}\n`);
        return null;
    }
    if (typeof j.peak_bytes !== 'number') {
        process.stderr.write(`bench/ort: aliasguard plan ${m.id}: no peak_bytes in its JSON\n`);
        return null;
    }
    return { peak: j.peak_bytes, lb: typeof j.lower_bound_bytes === 'number' ? j.lower_bound_bytes : null };
}

const head = withPlan ? ['model', 'ORT bytes', 'ORT', 'ours bytes', 'ours', 'ours/ORT', 'lower bound', 'ours/LB']
                      : ['model', 'ORT bytes', 'ORT', 'ORT run-1 peak', 'ORT steady peak'];
const out = [head];
for (const r of rows) {
    if (r.ort_bytes === null) {
        out.push([r.id, '-', r.how]);
        continue;
    }
    if (!withPlan) {
        out.push([r.id, String(r.ort_bytes), human(r.ort_bytes), human(r.run1_peak_bytes), human(r.steady_peak_bytes)]);
        continue;
    }
    const p = plan(models.get(r.id));
    const ratio = p && r.ort_bytes > 0 ? (p.peak / r.ort_bytes).toFixed(3) : '-';
    const lbr = p && p.lb ? (p.peak / p.lb).toFixed(3) : '-';
    out.push([r.id, String(r.ort_bytes), human(r.ort_bytes), p ? String(p.peak) : '-', p ? human(p.peak) : '-',
              ratio, p ? human(p.lb) : '-', lbr]);
}
const width = head.map((_, c) => Math.max(...out.filter((row) => row.length === head.length).map((row) => row[c].length)));
console.log(withPlan ? '\n== activation memory: ONNX Runtime memory pattern (opt=disabled, 1 thread) vs aliasguard plan --align 64 =='
                     : '\n== activation memory: ONNX Runtime memory pattern (opt=disabled, 1 thread) ==');
for (const row of out) {
    if (row.length !== head.length) {
        console.log(`${row[0].padEnd(width[0])}  ${row.slice(1).join('  ')}`);
        continue;
    }
    console.log(row.map((cell, c) => (c === 0 ? cell.padEnd(width[c]) : cell.padStart(width[c]))).join('  '));
}
EOF
echo "(ORT rows in JSON: $results)"
