"""Checker of the Citus stage: every committed change of the distributed
table `docs` captured exactly once, in order per key, across shard moves,
splits and worker restarts.

Reads the final table through the coordinator and every worker's log of the
table's shard placements.  A shard's placements are read one after another,
each to its end, in the order they were made (changefeed.shard_placement):
a move or split makes the new placement, whose capture starts after its data
is loaded, before the old one stops taking writes.  Each key's changes must
then carry v = 1, 2, ..., its final v (write.py), each change's image from
before the v before it.

  python3 check.py COORDINATOR_CONNINFO WORKER_CONNINFO... [--broken]
  python3 check.py COORDINATOR_CONNINFO --deliveries

--broken reads each shard's newest placement first, as a handoff that did not
read the old placement to its end would: the check must then fail.
--deliveries checks instead what the processor on the coordinator was handed
(test/citus/processor.cpp: citus_check.deliveries, in the order handed),
through the coordinator's feed that changefeed.collect() fills.
Prints one summary line; exits 1 on any loss, phantom, duplicate, misorder or
wrong image from before.
"""
import argparse
import sys

import psycopg

PLACEMENTS = """
SELECT p.created_at, p.collection_id, p.shard_id, p.dropped_at IS NOT NULL,
       l.seq, l.op, (l.current->>'id')::bigint, (l.current->>'v')::bigint, l.previous
  FROM changefeed.shard_placement p
  JOIN changefeed.log l ON l.collection_id = p.collection_id
 WHERE p.table_name = 'public.docs' AND l.op IN ('c', 'r', 'd')
"""


def before_of(v, previous):
    """v of a change's image from before: stored whole, or as the patch
    {"": {"v": [before], ...}} that turns the image after into it
    (extension/capture/previous_patch.cpp); v itself when the patch leaves it."""
    if previous is None:
        return None
    patch = previous.get("")
    if patch is None:
        return previous.get("v")
    entry = patch.get("v")
    return v if entry is None else (entry[0] if entry else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("coordinator")
    ap.add_argument("workers", nargs="*")
    ap.add_argument("--broken", action="store_true")
    ap.add_argument("--deliveries", action="store_true")
    a = ap.parse_args()

    with psycopg.connect(a.coordinator) as conn:
        final = dict(conn.execute("SELECT id, v FROM docs").fetchall())

    rows = []
    placements = set()
    dropped = set()
    if a.deliveries:
        with psycopg.connect(a.coordinator) as conn:
            for did, op, key, v, before in conn.execute(
                    "SELECT did, op, id, v, prev_v FROM citus_check.deliveries WHERE op IN ('c', 'r', 'd')"):
                rows.append(((did,), op, key, v, before))
    for node, conninfo in enumerate(a.workers):
        with psycopg.connect(conninfo) as conn:
            for r in conn.execute(PLACEMENTS):
                created, collection, shard, gone, seq, op, key, v, previous = r
                before = before_of(v, previous)
                order = (-created.timestamp() if a.broken else created.timestamp(), node, collection, seq)
                rows.append((order, op, key, v, before))
                placements.add((node, collection, shard))
                if gone:
                    dropped.add((node, collection))
    rows.sort()

    seen = {}
    lost = phantom = duplicated = misordered = wrong_before = 0
    for _, op, key, v, before in rows:
        chain = seen.setdefault(key, [])
        if op == "r" and before != v - 1:
            wrong_before += 1
        if op == "c" and v != 1:
            wrong_before += 1
        chain.append(v)
    for key, chain in seen.items():
        top = final.get(key)
        if top is None:
            phantom += len(chain)
            continue
        want = set(range(1, top + 1))
        got = set()
        for i, v in enumerate(chain):
            if v not in want:
                phantom += 1
            elif v in got:
                duplicated += 1
            got.add(v)
            if i > 0 and v < chain[i - 1]:
                misordered += 1
        lost += len(want - got)
    for key, top in final.items():
        if key not in seen:
            lost += top

    changes = sum(final.values())
    ok = lost == phantom == duplicated == misordered == wrong_before == 0
    where = (f"handed to the processor on the coordinator" if a.deliveries else
             f"in {len(placements)} placements ({len(dropped)} dropped by Citus since)")
    print(f"citus check: {changes} committed changes of {len(final)} keys {where}: lost {lost}, phantom {phantom}, "
          f"duplicated {duplicated}, misordered {misordered}, wrong image before {wrong_before}: "
          f"{'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
