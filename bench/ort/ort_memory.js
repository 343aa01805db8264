#!/usr/bin/env node
// Reference figure for the planner comparison: runs each corpus model under
// ONNX Runtime (onnxruntime-node, CPU, graph optimisations off, one thread,
// memory pattern on) and reads the size of ORT's planned activation block
// from its profiling counters. Prints one JSON line per model.
'use strict';

// ORT's Linux build ships telemetry that writes files under $HOME and $TMPDIR
// on the first session of a process; the opt-out must precede the require.
process.env.ORT_DISABLE_TELEMETRY = '1';

const fs = require('fs');
const os = require('os');
const path = require('path');
const { createRequire } = require('module');

const USAGE = `usage: node ort_memory.js [options] MANIFEST CORPUS_DIR [ID...]

For each model of MANIFEST (bench/corpus.json) found as CORPUS_DIR/<id>.onnx
(or only the IDs given), prints {"id", "ort_bytes", "how", ...} on one line.

options:
  --ort-dir DIR   directory whose node_modules holds onnxruntime-node
                  (default: $AG_ORT_DIR, else resolved from this script)
  --opt LEVEL     graphOptimizationLevel: disabled (default), basic, extended, all
  --runs N        runs per model, at least 2 (default 2): the first run records
                  the memory pattern, the last one allocates it
  -h, --help      show this help`;

function die(msg) {
    process.stderr.write(`ort_memory: ${msg}\n`);
    process.exit(2);
}

function parseArgs(argv) {
    const a = { ortDir: process.env.AG_ORT_DIR || '', opt: 'disabled', runs: 2, rest: [] };
    for (let i = 0; i < argv.length; i++) {
        const s = argv[i];
        const value = () => {
            if (i + 1 >= argv.length) die(`${s} needs a value`);
            return argv[++i];
        };
        if (s === '-h' || s === '--help') {
            process.stdout.write(USAGE + '\n');
            process.exit(0);
        } else if (s === '--ort-dir') {
            a.ortDir = value();
        } else if (s === '--opt') {
            a.opt = value();
            if (!['disabled', 'basic', 'extended', 'all'].includes(a.opt)) die(`bad --opt '${a.opt}'`);
        } else if (s === '--runs') {
            a.runs = Number(value());
            if (!Number.isInteger(a.runs) || a.runs < 2) die('--runs must be an integer >= 2');
        } else if (s.startsWith('-')) {
            die(`unknown option '${s}'\n${USAGE}`);
        } else {
            a.rest.push(s);
        }
    }
    if (a.rest.length < 2) die(USAGE);
    return a;
}

function loadOrt(ortDir) {
    const req = ortDir ? createRequire(path.join(path.resolve(ortDir), 'package.json')) : require;
    try {
        return req('onnxruntime-node');
    } catch (e) {
        die(`cannot load onnxruntime-node${ortDir ? ` from ${ortDir}` : ''}: ${e.message.split('\n')[0]}\n` +
            'install it with: ONNXRUNTIME_NODE_INSTALL=skip npm install (see bench/ort/README.md)');
    }
    return null;
}

// Typed array and value conversion per ORT tensor type. float16 is carried as
// raw bits, so only the value 0 (all bits clear) can be given for it.
const TYPES = {
    float32: [Float32Array, Number],
    float64: [Float64Array, Number],
    int8: [Int8Array, Number],
    uint8: [Uint8Array, Number],
    int16: [Int16Array, Number],
    uint16: [Uint16Array, Number],
    int32: [Int32Array, Number],
    uint32: [Uint32Array, Number],
    int64: [BigInt64Array, BigInt],
    uint64: [BigUint64Array, BigInt],
    bool: [Uint8Array, (v) => (v ? 1 : 0)],
    float16: [Uint16Array, (v) => {
        if (Number(v) !== 0) throw new Error('float16 inputs can only be filled with 0');
        return 0;
    }],
};

// Inputs without a manifest value are zero-filled: ORT's plan depends on the
// shapes only, except for ops whose output shape depends on data, which the
// corpus models feed from the given values (e.g. Silero's sample rate).
function makeFeeds(ort, inputs) {
    const feeds = {};
    for (const [name, spec] of Object.entries(inputs || {})) {
        const t = TYPES[spec.type];
        if (!t) throw new Error(`input '${name}': unsupported type '${spec.type}'`);
        const dims = spec.dims || [];
        const n = dims.reduce((p, d) => p * d, 1);
        const data = new t[0](n);
        if (spec.value !== undefined) data.fill(t[1](spec.value));
        feeds[name] = new ort.Tensor(spec.type, data, dims);
    }
    return feeds;
}

const int = (args, key) => {
    const v = args[key];
    if (v === undefined) throw new Error(`profile event lacks '${key}'`);
    return Number(v);
};

// Splits the Node events of a profile by the model_run events that enclose
// them and derives, per run, the bytes requested from the CPU arena before the
// first kernel and the highest bytes requested during the run.
function analyseProfile(events) {
    const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run')
        .sort((a, b) => a.ts - b.ts);
    const nodes = events.filter((e) => e.cat === 'Node' && e.args &&
        e.args.mem_bytes_requested_in_use !== undefined);
    return runs.map((r) => {
        const mine = nodes.filter((n) => n.ts >= r.ts && n.ts <= r.ts + r.dur)
            .sort((a, b) => a.ts - b.ts);
        if (mine.length === 0) return null;
        const first = mine[0].args;
        const before = int(first, 'mem_bytes_requested_in_use') - int(first, 'mem_requested_in_use_delta');
        let peak = before;
        for (const n of mine) peak = Math.max(peak, int(n.args, 'mem_bytes_requested_in_use'));
        return { before, peak, kernels: mine.length, ms: r.dur / 1000 };
    });
}

async function measure(ort, model, file, opts) {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ag-ort-'));
    try {
        const session = await ort.InferenceSession.create(file, {
            graphOptimizationLevel: opts.opt,
            intraOpNumThreads: 1,
            interOpNumThreads: 1,
            executionMode: 'sequential',
            enableCpuMemArena: true, // the profiler's memory counters come from the arena
            enableMemPattern: true,
            enableProfiling: true,
            profileFilePrefix: path.join(tmp, 'profile'),
            logSeverityLevel: 3,
        });
        const feeds = makeFeeds(ort, model.inputs);
        for (let i = 0; i < opts.runs; i++) await session.run(feeds);
        await session.release(); // writes the profile
        const files = fs.readdirSync(tmp).filter((f) => f.endsWith('.json'));
        if (files.length !== 1) throw new Error(`expected one profile file, found ${files.length}`);
        const runs = analyseProfile(JSON.parse(fs.readFileSync(path.join(tmp, files[0]), 'utf8')));
        if (runs.length !== opts.runs || runs.some((r) => r === null)) {
            throw new Error('profile lacks per-kernel memory counters for some run');
        }
        const base = runs[0].before; // initialisers and pre-packed weights held in the arena
        const last = runs[runs.length - 1];
        return {
            id: model.id,
            ort_bytes: last.before - base,
            how: `onnxruntime-node ${ort.env.versions.node}, opt=${opts.opt}, 1 thread, sequential, ` +
                 'mem pattern on: bytes requested from the CPU arena before the first kernel of run ' +
                 `${opts.runs} minus the same before run 1 (the memory-pattern block)`,
            arena_base_bytes: base,
            run1_peak_bytes: runs[0].peak - base,
            steady_peak_bytes: last.peak - base,
            kernels: last.kernels,
            run_ms: last.ms,
        };
    } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
    }
}

async function main() {
    const a = parseArgs(process.argv.slice(2));
    const [manifestPath, corpusDir, ...ids] = a.rest;
    let manifest;
    try {
        manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
    } catch (e) {
        die(`cannot read manifest ${manifestPath}: ${e.message}`);
    }
    const models = (manifest.models || []).filter((m) => ids.length === 0 || ids.includes(m.id));
    for (const id of ids) {
        if (!models.some((m) => m.id === id)) die(`model '${id}' is not in ${manifestPath}`);
    }
    const ort = loadOrt(a.ortDir);
    let failed = 0;
    for (const m of models) {
        const file = path.join(corpusDir, `${m.id}.onnx`);
        if (!fs.existsSync(file)) {
            process.stderr.write(`note: ${m.id}: ${file} not found: skipped\n`);
            continue;
        }
        let row;
        try {
            row = await measure(ort, m, file, a);
        } catch (e) {
            failed++;
            row = { id: m.id, ort_bytes: null, how: `error: ${String(e.message || e).split('\n')[0]}` };
        }
        process.stdout.write(JSON.stringify(row) + '\n');
    }
    process.exitCode = failed ? 1 : 0;
}

main().catch((e) => die(e.stack || String(e)));
