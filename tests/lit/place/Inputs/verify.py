# Checks a placed trace (id,lower,upper,size,offset) without aliasguard code:
# pairwise byte overlap of time-overlapping buffers, alignment, capacity.
import csv, sys

rows = list(csv.DictReader(open(sys.argv[1])))
cap, align = int(sys.argv[2]), int(sys.argv[3])
b = [(int(r["lower"]), int(r["upper"]), int(r["size"]), int(r["offset"])) for r in rows]
for i, (l, u, s, o) in enumerate(b):
    assert o % align == 0, ("misaligned", rows[i]["id"])
    assert o + s <= cap, ("over capacity", rows[i]["id"])
    for j in range(i):
        l2, u2, s2, o2 = b[j]
        if s and s2 and l < u2 and l2 < u:
            assert o + s <= o2 or o2 + s2 <= o, ("overlap", rows[i]["id"], rows[j]["id"])
print("ok %d buffers" % len(b))
