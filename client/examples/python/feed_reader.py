#!/usr/bin/env python3
"""Reads a table's change feed with plain SQL and keeps its position in a file.

The read protocol of docs/read-protocol.md, in Python with psycopg 3
(Debian: python3-psycopg).  Prints each change as one JSON line on stdout,
then stores the position after it: at least once -- a reader killed between
the two prints the last page again on its next run; a reader that stops
cleanly (--exit-when-idle, SIGTERM, Ctrl-C) resumes exactly where it left off.

    python3 feed_reader.py --dsn "dbname=app" --table public.orders --state orders.pos

Exit codes: 0 stopped, 2 usage, 3 history lost (CF006: retention dropped
changes the saved position had not read; CF019: capture was off after it), 4 the saved position is not usable
here (CF004 malformed, CF005 from another cluster or database), 5 the table is
not enabled (CF002) or may not be read (42501).
"""
import argparse
import json
import os
import select
import signal
import sys
import time

import psycopg
from psycopg import sql

NOT_ENABLED, BAD_POSITION, FOREIGN_POSITION = "CF002", "CF004", "CF005"
HISTORY_LOST = ("CF006", "CF019")  # retention dropped it; capture was off
PERMISSION_DENIED = "42501"

READ = """
SELECT seq, txid::text, range_id, operation, doc_id, current, previous,
       written_at, event_id, "position"
  FROM changefeed.read(%(table)s::regclass, %(since)s, max_changes => %(page)s, mode => %(mode)s)
"""


def load_position(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip() or None
    except FileNotFoundError:
        return None


def save_position(path, position):
    # Write, sync, then rename: a crash leaves the old position or the new one.
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(position + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def start_position(conn, table, start):
    """Where a reader without a saved position starts."""
    if start == "now":
        return conn.execute("SELECT changefeed.current_position()").fetchone()[0]
    if start == "enabled":
        # Every change since the table was enabled (CF006 once retention dropped some).
        query = ("SELECT changefeed.position_at(%s::regclass, enabled_at) FROM changefeed.collections"
                 " WHERE table_name = %s::regclass")
        return conn.execute(query, (table, table)).fetchone()[0]
    return conn.execute("SELECT changefeed.position_at(%s::regclass, %s::timestamptz)",
                        (table, start)).fetchone()[0]


def read_page(conn, table, since, page, mode):
    """One read() and the position to keep after it, in one REPEATABLE READ
    transaction: when the read returns nothing, current_position() then sees the
    same snapshot the read saw, so nothing that commits in between is skipped."""
    with conn.transaction():
        rows = conn.execute(READ, {"table": table, "since": since, "page": page, "mode": mode}).fetchall()
        if rows:
            return rows, rows[-1][-1]
        return rows, conn.execute("SELECT changefeed.current_position()").fetchone()[0]


def emit(row):
    seq, txid, range_id, operation, doc_id, current, previous, written_at, event_id, _ = row
    print(json.dumps({"seq": seq, "txid": txid, "range_id": range_id, "operation": operation,
                      "doc_id": doc_id, "current": current, "previous": previous,
                      "written_at": written_at.isoformat() if written_at else None,
                      "event_id": event_id}), flush=True)


class Stop(Exception):
    pass


class Stopper:
    """SIGTERM and SIGINT stop the reader between pages, never between printing
    a page and saving the position after it; a wait is cut short."""

    def __init__(self):
        self.requested = False
        self.waiting = False
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)

    def on_signal(self, signum, frame):
        self.requested = True
        if self.waiting:
            raise Stop()


def wait_for_wakeup(conn, woken, timeout, stopper):
    """Waits up to `timeout` seconds for a NOTIFY on the collection's channel.
    The notification is only a hint: the caller reads either way."""
    if not woken:
        stopper.waiting = True
        try:
            if stopper.requested:
                raise Stop()
            ready, _, _ = select.select([conn.fileno()], [], [], timeout)
        finally:
            stopper.waiting = False
        if ready:
            conn.execute("SELECT 1")  # lets psycopg consume the input and call the notify handler
    woken.clear()


def run(args, stopper):
    conn = psycopg.connect(args.dsn, autocommit=True)
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    channel = conn.execute("SELECT channel FROM changefeed.collections WHERE table_name = %s::regclass",
                           (args.table,)).fetchone()
    if channel is None:
        raise SystemExit(f"{args.table} is not enabled, or this role may not read it")
    woken = []
    conn.add_notify_handler(lambda n: woken.append(n.payload))
    # LISTEN before the first read: a commit after the read then always wakes us.
    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel[0])))

    position = load_position(args.state)
    if position is None:
        position = start_position(conn, args.table, args.start)
        save_position(args.state, position)
    idle_since = time.monotonic()
    while not stopper.requested:
        rows, position_after = read_page(conn, args.table, position, args.page, args.mode)
        for row in rows:
            emit(row)
        if position_after != position:
            save_position(args.state, position_after)  # after the changes were handled
            position = position_after
        if len(rows) == args.page:
            continue  # a full page: more may be waiting, read on at once
        if rows:
            idle_since = time.monotonic()
        # Caught up with the read's snapshot: wait for a wake-up, or poll.
        timeout = args.poll
        if args.exit_when_idle is not None:
            left = args.exit_when_idle - (time.monotonic() - idle_since)
            if left <= 0:
                return 0
            timeout = min(timeout, left)
        try:
            wait_for_wakeup(conn, woken, timeout, stopper)
        except Stop:
            break
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dsn", default="", help="libpq connection string (default: the PG* environment)")
    p.add_argument("--table", required=True, help="an enabled table, e.g. public.orders")
    p.add_argument("--state", required=True, help="file that keeps the position between runs")
    p.add_argument("--start", default="now",
                   help="without a saved position: now (default), enabled (since enable()), or a time")
    p.add_argument("--mode", default="all", choices=["all", "latest"])
    p.add_argument("--page", type=int, default=1000, help="max_changes per read (1..100000)")
    p.add_argument("--poll", type=float, default=5.0, help="seconds between reads without a wake-up")
    p.add_argument("--exit-when-idle", type=float, default=None, metavar="SECONDS",
                   help="stop after this long without a change (default: run until interrupted)")
    args = p.parse_args()
    stopper = Stopper()
    backoff = 0.1
    while not stopper.requested:
        try:
            return run(args, stopper)
        except Stop:
            return 0
        except psycopg.errors.Error as e:
            state = e.sqlstate
            if state in HISTORY_LOST:
                print(f"history lost: {e}\n(see docs/runbooks/history-lost.md)", file=sys.stderr)
                return 3
            if state in (BAD_POSITION, FOREIGN_POSITION):
                print(f"the position in {args.state} cannot be used: {e}", file=sys.stderr)
                return 4
            if state in (NOT_ENABLED, PERMISSION_DENIED):
                print(f"cannot read {args.table}: {e}", file=sys.stderr)
                return 5
            if not isinstance(e, psycopg.OperationalError):
                raise
            # Connection lost, server restarting: resume from the saved position.
            print(f"reconnecting in {backoff:.1f}s: {e}", file=sys.stderr)
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
