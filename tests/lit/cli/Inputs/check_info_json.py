"""Checks an `aliasguard info --json` file: it must parse, and each KEY=VALUE
argument must hold (nodes, max_depth, subgraphs (count), unknown (count),
unknown_listed (entries), hbm (bytes), inference=null, stats=yes)."""
import json
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)
facts = {
    "nodes": d["nodes"],
    "max_depth": d["max_depth"],
    "subgraphs": len(d["subgraphs"]),
    "unknown": d["unknown_shapes"]["count"],
    "unknown_listed": len(d["unknown_shapes"]["tensors"]),
    "hbm": d["tensor_bytes"]["hbm"],
    "inference": "null" if d["inference"] is None else "set",
    "stats": "yes" if "stats" in d else "no",
}
assert sum(d["ops"].values()) == d["nodes"], "op histogram does not add up to the node count"
assert sum(s["nodes"] for s in d["subgraphs"]) == d["nodes"], "subgraph sizes do not add up"
bad = 0
for arg in sys.argv[2:]:
    key, want = arg.split("=", 1)
    got = str(facts[key])
    if got != want:
        print("%s: %s is %s, expected %s" % (sys.argv[1], key, got, want), file=sys.stderr)
        bad = 1
sys.exit(bad)
