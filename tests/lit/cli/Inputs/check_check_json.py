"""Checks an `aliasguard check --json` file against the documented schema
(docs/cli.md, README "check --json schema"): exact key sets, string fields,
counts that agree with the lists.  KEY=VALUE arguments must also hold:
isolations=N, warnings=M, passes=P1,P2,... (the by_pass keys, in order),
kinds=K1,K2,... (the by_kind keys, sorted)."""
import json
import sys

with open(sys.argv[1], encoding="utf-8") as f:
    d = json.load(f)


def keys(obj, want, where):
    got = list(obj.keys())
    assert got == want, "%s: keys %s, expected %s" % (where, got, want)


keys(d, ["input", "graph", "isolations", "warnings", "counts", "plan"], "top level")
assert isinstance(d["input"], str) and isinstance(d["graph"], str)
for k, iso in enumerate(d["isolations"]):
    keys(iso, ["pass", "rule", "kind", "graph", "node", "producer", "consumer"], "isolation %d" % k)
    assert all(isinstance(v, str) for v in iso.values()), "isolation %d: non-string field" % k
    assert iso["pass"] and iso["rule"] and iso["kind"] and iso["graph"], "isolation %d: empty field" % k
    assert (iso["node"] == "") == (iso["kind"] == "control"), "isolation %d: node vs kind" % k
for k, w in enumerate(d["warnings"]):
    keys(w, ["pass", "code", "message", "nodes"], "warning %d" % k)
    assert all(isinstance(n, str) for n in w["nodes"]), "warning %d: nodes" % k
c = d["counts"]
keys(c, ["isolations", "warnings", "by_pass", "by_kind"], "counts")
assert c["isolations"] == len(d["isolations"]), "counts.isolations"
assert c["warnings"] == len(d["warnings"]), "counts.warnings"
for name, pc in c["by_pass"].items():
    keys(pc, ["isolations", "warnings"], "by_pass." + name)
    assert pc["isolations"] == sum(1 for i in d["isolations"] if i["pass"] == name), "by_pass." + name
    assert pc["warnings"] == sum(1 for w in d["warnings"] if w["pass"] == name), "by_pass." + name
assert sum(pc["isolations"] for pc in c["by_pass"].values()) == c["isolations"], "by_pass sum"
for kind, n in c["by_kind"].items():
    assert n == sum(1 for i in d["isolations"] if i["kind"] == kind), "by_kind." + kind
assert sum(c["by_kind"].values()) == c["isolations"], "by_kind sum"

facts = {
    "isolations": str(c["isolations"]),
    "warnings": str(c["warnings"]),
    "passes": ",".join(c["by_pass"].keys()),
    "kinds": ",".join(sorted(c["by_kind"].keys())),
}
bad = 0
for arg in sys.argv[2:]:
    key, want = arg.split("=", 1)
    if facts[key] != want:
        print("%s: %s is %s, expected %s" % (sys.argv[1], key, facts[key], want), file=sys.stderr)
        bad = 1
sys.exit(bad)
