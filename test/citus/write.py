"""Writers for the Citus stage: clients that increment counters of a
distributed table through the coordinator until told to stop.

Each transaction upserts one to three random keys (insert with v = 1, or
v = v + 1), and one in ten rolls back.  So every committed change of a key
carries the next v: the checker expects each key's changes, in the order the
feed gives them, to be exactly 1, 2, ..., its final v.  Errors (a worker
restarting, a shard being moved) are retried; a commit whose outcome was lost
with the connection needs no bookkeeping, since the table's final v says what
committed.

  python3 write.py CONNINFO --clients N --keys K --stop-file PATH --stats PATH
"""
import argparse
import os
import random
import threading
import time

import psycopg


def client(conninfo, keys, stop_file, counts, lock, seed):
    rnd = random.Random(seed)
    conn = None
    committed = rolled_back = errors = 0
    while not os.path.exists(stop_file):
        try:
            if conn is None or conn.closed:
                conn = psycopg.connect(conninfo, autocommit=False)
            with conn.cursor() as cur:
                for _ in range(rnd.randint(1, 3)):
                    cur.execute("INSERT INTO docs (id, v, pad) VALUES (%s, 1, %s) "
                                "ON CONFLICT (id) DO UPDATE SET v = docs.v + 1, pad = excluded.pad",
                                (rnd.randint(1, keys), "x" * rnd.randint(0, 200)))
            if rnd.random() < 0.1:
                conn.rollback()
                rolled_back += 1
            else:
                conn.commit()
                committed += 1
        except psycopg.Error:
            errors += 1
            try:
                if conn is not None:
                    conn.close()
            except psycopg.Error:
                pass
            conn = None
            time.sleep(0.05)
    if conn is not None:
        conn.close()
    with lock:
        counts["committed"] += committed
        counts["rolled_back"] += rolled_back
        counts["errors"] += errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("conninfo")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--keys", type=int, default=2000)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--stats", required=True)
    a = ap.parse_args()
    counts = {"committed": 0, "rolled_back": 0, "errors": 0}
    lock = threading.Lock()
    threads = [threading.Thread(target=client, args=(a.conninfo, a.keys, a.stop_file, counts, lock, i))
               for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(a.stats, "w") as f:
        f.write("committed=%(committed)d rolled_back=%(rolled_back)d errors=%(errors)d\n" % counts)


if __name__ == "__main__":
    main()
