#!/usr/bin/env bash
# The Python example of the SQL read protocol (client/examples/python/feed_reader.py,
# docs/read-protocol.md) against a real cluster: a reader role pages the feed from
# the table's enabling, is woken by LISTEN for what commits while it waits (the
# poll interval is a minute, so only a NOTIFY can deliver in time), stops, and a
# second run resumes from the position it saved.  Every change must arrive exactly
# once, in the order written; a damaged position file must stop the reader (CF004)
# instead of restarting it.
#
#   bash test/stages/python_example.sh [--port N]   (needs the extension installed, python3-psycopg)
set -euo pipefail
cd "$(dirname "$0")/../.."
port=55486
[ "${1:-}" = --port ] && port=$2
# Debian's interpreter, the one python3-psycopg installs into.
python=${CHANGEFEED_PYTHON:-/usr/bin/python3}
example=$(pwd)/client/examples/python/feed_reader.py

dir=$(mktemp -d /tmp/changefeed-python.XXXXXX)
chmod 755 "$dir"
trap 'bash test/cluster.sh stop "$dir/cluster" --immediate >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bash test/cluster.sh start "$dir/cluster" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 0"
eval "$(bash test/cluster.sh env "$dir/cluster")"

q() { psql -X -q -v ON_ERROR_STOP=1 -At -c "$1"; }
failed=0
check() {  # name, expected, actual
    if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected '$2', got '$3'"; failed=1; fi
}

q "CREATE EXTENSION changefeed"
q "CREATE ROLE feed LOGIN IN ROLE changefeed_reader"
q "CREATE TABLE orders (id int PRIMARY KEY, v int)"
q "SELECT changefeed.enable('orders', ranges => 4)" >/dev/null
q "GRANT SELECT ON orders TO feed"
dsn="host=$PGHOST port=$PGPORT dbname=postgres user=feed"

# The channel lookup of docs/read-protocol.md, as the reading role: the name cast
# to regclass finds the table by its plain and its qualified name; a text
# parameter fails (42883) and a text comparison finds nothing ("public" is on
# the search_path, so the regclass prints as "orders").
qf() { PGUSER=feed q "$1"; }
channel=$(q "SELECT 'changefeed_' || id FROM changefeed.collections WHERE table_name = 'orders'::regclass")
check "channel lookup by the qualified name" "$channel" \
    "$(qf "SELECT channel FROM changefeed.collections WHERE table_name = 'public.orders'::regclass")"
check "channel lookup by the plain name" "$channel" \
    "$(qf "SELECT channel FROM changefeed.collections WHERE table_name = 'orders'::regclass")"
check "channel_of() names the same channel" "$channel" \
    "$(qf "SELECT changefeed.channel_of(id) FROM changefeed.collections WHERE table_name = 'public.orders'::regclass")"
check "a text comparison finds nothing" "" \
    "$(qf "SELECT channel FROM changefeed.collections WHERE table_name::text = 'public.orders'")"
check "a text parameter fails with 42883" "42883" "$(PGUSER=feed psql -X -q -At -v VERBOSITY=sqlstate \
    -c "PREPARE lookup(text) AS SELECT channel FROM changefeed.collections WHERE table_name = \$1" 2>&1 |
    grep -o 42883 || true)"

# Writes a batch, one transaction per statement (so the commit order is the
# write order), and appends what the feed must deliver to $dir/expected.
write_batch() {  # first id, last id
    local i
    for i in $(seq "$1" "$2"); do
        q "INSERT INTO orders VALUES ($i, $i)"
        echo "create $i $i" >>"$dir/expected"
        if [ $((i % 3)) -eq 0 ]; then
            q "UPDATE orders SET v = $((i * 10)) WHERE id = $i"
            echo "replace $i $((i * 10))" >>"$dir/expected"
        fi
        if [ $((i % 5)) -eq 0 ]; then
            q "DELETE FROM orders WHERE id = $((i - 1))"
            echo "delete $((i - 1)) -" >>"$dir/expected"
        fi
    done
    # Several changes in one transaction: they arrive together, in write order.
    q "BEGIN; UPDATE orders SET v = -1 WHERE id = $2; INSERT INTO orders VALUES ($2 + 1000, 0); COMMIT"
    echo "replace $2 -1" >>"$dir/expected"
    echo "create $(($2 + 1000)) 0" >>"$dir/expected"
}
# "operation doc_id v" per delivered change, the form of $dir/expected.
summarize() {
    "$python" -c '
import json, sys
for line in sys.stdin:
    c = json.loads(line)
    v = c["current"]["v"] if c["current"] else "-"
    print(c["operation"], c["doc_id"], v)' <"$1"
}
lines() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }

: >"$dir/expected"
write_batch 1 25
n_a=$(lines "$dir/expected")

# Run 1: from the enabling, in pages of 7 (several pages and windows).  A
# minute between polls: what batch B writes while it waits can only arrive
# within the deadline through LISTEN.  Stopped by SIGTERM, as a service is.
"$python" "$example" --dsn "$dsn" --table public.orders --state "$dir/orders.pos" --start enabled \
    --page 7 --poll 60 >"$dir/run1.out" 2>"$dir/run1.err" &
reader=$!
wait_lines() {  # file, count, deadline in tenths of a second
    for _ in $(seq "$3"); do
        [ "$(lines "$1")" -ge "$2" ] && return 0
        kill -0 "$reader" 2>/dev/null || return 0
        sleep 0.1
    done
}
wait_lines "$dir/run1.out" "$n_a" 300
check "run 1 read batch A" "$n_a" "$(lines "$dir/run1.out")"
sleep 0.5   # the reader now waits on LISTEN
write_batch 26 40
n_ab=$(lines "$dir/expected")
wait_lines "$dir/run1.out" "$n_ab" 50
check "run 1 was woken for batch B within 5 s (poll interval 60 s)" "$n_ab" "$(lines "$dir/run1.out")"
kill -TERM "$reader"
rc=0
wait "$reader" || rc=$?
check "run 1 stopped cleanly on SIGTERM" 0 "$rc"
if [ -s "$dir/run1.err" ]; then cat "$dir/run1.err"; fi

# Run 2: batch C was written while no reader ran; it resumes from the saved position.
write_batch 41 50
rc=0
"$python" "$example" --dsn "$dsn" --table public.orders --state "$dir/orders.pos" --start now \
    --page 7 --exit-when-idle 1 >"$dir/run2.out" 2>"$dir/run2.err" || rc=$?
check "run 2 exited cleanly" 0 "$rc"
if [ -s "$dir/run2.err" ]; then cat "$dir/run2.err"; fi

cat "$dir/run1.out" "$dir/run2.out" >"$dir/all.out"
if diff <(summarize "$dir/all.out") "$dir/expected" >"$dir/diff"; then
    echo "ok   every change arrived exactly once, in the order written ($(lines "$dir/expected") changes)"
else
    echo "FAIL delivered changes differ from those written (< delivered, > written):"
    head -40 "$dir/diff"
    failed=1
fi
check "seq strictly increasing, event ids unique" "ok" "$("$python" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
seqs = [r["seq"] for r in rows]
ids = [r["event_id"] for r in rows]
print("ok" if seqs == sorted(set(seqs)) and len(set(ids)) == len(ids) else "no")' "$dir/all.out")"

# Run 3: nothing new, nothing again.
"$python" "$example" --dsn "$dsn" --table public.orders --state "$dir/orders.pos" \
    --exit-when-idle 0.5 >"$dir/run3.out"
check "run 3 delivers nothing twice" 0 "$(lines "$dir/run3.out")"

# A damaged position is an error (exit 4, CF004), never a silent restart from now.
echo "cf2.garbage" >"$dir/bad.pos"
rc=0
"$python" "$example" --dsn "$dsn" --table public.orders --state "$dir/bad.pos" \
    --exit-when-idle 0.5 >"$dir/bad.out" 2>"$dir/bad.err" || rc=$?
check "a damaged position stops the reader (exit 4)" 4 "$rc"
check "and delivers nothing" 0 "$(lines "$dir/bad.out")"

[ "$failed" -eq 0 ] && echo "python example: all checks passed"
exit "$failed"
