#!/usr/bin/env bash
# A dump and restore round trip as a user would do it, on a throwaway cluster
# with the library preloaded:
#   database `src`: the extension, two enabled tables (one with a composite
#   key), writes, a processor's leases taken and checkpointed;
#   `pg_dump -Fc src`, restored into
#     r_template0  a new database made from template0,
#     r_template1  a new database made from a template1 that has the extension,
#     r_elsewhere  a new database on another cluster, whose transaction ids
#                  are behind the source's (a restore onto a new server);
# then, in each restored database, checks what a user relies on: the restore
# is clean, the collections (ids, options, channels), processors and every
# lease's checkpoint come back as dumped, while the log, ticks, horizons,
# instances and applied ids start empty (not dumped, docs/operations.md),
# collections lists the tables by name, new writes are captured and read back,
# disable works, and the restored checkpoint (a position of the old database)
# is refused with our error (CF005), never read as an empty success.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/dump_restore.sh [--port N] [--keep]
# Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source test/support/checks.sh
stage_options dump_restore.sh 56160 "$@"
stage_scratch dump-restore
trap 'stage_cleanup "$scratch/cluster" "$scratch/elsewhere"' EXIT

bash test/cluster.sh start "$scratch/cluster" --port "$port" --fsync-off
bash test/cluster.sh start "$scratch/elsewhere" --port "$((port + 1))" --fsync-off
eval "$(bash test/cluster.sh env "$scratch/cluster")"

# q DB SQL: the result rows, unaligned; fails the script on an SQL error
# (used for the set-up, which must work).
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$1" -c "$2"; }
# burn_xids DB N: uses up N transaction ids, one transaction each.
burn_xids() {
    q "$1" "DO \$\$ BEGIN FOR i IN 1..$2 LOOP PERFORM pg_catalog.pg_current_xact_id(); COMMIT; END LOOP; END \$\$"
}
# try DB SQL: prints "OK <rows>" or "<SQLSTATE> <message>"; never fails.
try() { psql_try -d "$1" -c "$2"; }

# What a restore must bring back as it was dumped: the collections (ids,
# options, channels), the processors with their owners, every lease with its
# checkpoint text, and tenant bindings.
state() {
    q "$1" "SELECT 'collection ' || concat_ws(' | ', id, table_name, key_columns, partition_key, ranges, retention,
                                               keep_previous, tenant_column, ttl_column, channel, replicated)
              FROM changefeed.collections
            UNION ALL
            SELECT 'processor ' || concat_ws(' | ', collection_id, name, owner_role) FROM changefeed.processor
            UNION ALL
            SELECT 'lease ' || concat_ws(' | ', collection_id, processor, range_id, owner, epoch, checkpoint)
              FROM changefeed.lease
            UNION ALL
            SELECT 'tenant binding ' || concat_ws(' | ', role_id, tenant) FROM changefeed.tenant_binding
            ORDER BY 1"
}
# What a restore starts without (docs/operations.md): the log's rows, ticks,
# the retention horizon, live instances, the deduplication store.
left_behind() {
    q "$1" "SELECT concat_ws(' ', (SELECT count(*) FROM changefeed.log), (SELECT count(*) FROM changefeed.tick),
                                  (SELECT count(*) FROM changefeed.horizon), (SELECT count(*) FROM changefeed.instance),
                                  (SELECT count(*) FROM changefeed.applied))"
}

echo "== source database"
# The source's transaction ids run ahead of the other cluster's.
burn_xids postgres 300
q postgres "CREATE DATABASE src"
q src "CREATE EXTENSION changefeed"
q src "CREATE TABLE public.users (id int PRIMARY KEY, name text NOT NULL)"
q src "CREATE TABLE public.order_lines (order_id int, line int, sku text, qty int,
                                        PRIMARY KEY (order_id, line))"
q src "SELECT changefeed.enable('public.users'), changefeed.enable('public.order_lines', ranges => 4)" >/dev/null
# The processor starts before the writes: its leases hold the start position.
q src "SELECT changefeed.lease_init('users', 'billing')" >/dev/null
initial=$(q src "SELECT DISTINCT checkpoint FROM changefeed.lease WHERE processor = 'billing'")
q src "INSERT INTO users SELECT g, 'user ' || g FROM generate_series(1, 50) g"
q src "INSERT INTO order_lines SELECT o, l, 'sku-' || o || '-' || l, l FROM generate_series(1, 10) o, generate_series(1, 3) l"
q src "UPDATE users SET name = name || ' (renamed)' WHERE id % 7 = 0"
q src "DELETE FROM order_lines WHERE order_id = 3"

# One instance takes the leases and checkpoints every range after what it read.
q src "DO \$\$
DECLARE
    l record;
    pos text;
BEGIN
    FOR l IN SELECT * FROM changefeed.lease_acquire('users', 'billing', 'billing-1', '10 minutes') LOOP
        SELECT r.position INTO pos FROM changefeed.read('users', l.checkpoint, ranges => ARRAY[l.range_id]) r
         ORDER BY r.seq DESC LIMIT 1;
        PERFORM changefeed.lease_checkpoint('users', 'billing', l.range_id, 'billing-1', l.epoch,
                                            coalesce(pos, l.checkpoint));
    END LOOP;
END
\$\$"
# Writes after the checkpoint: the processor has not read these yet.
q src "INSERT INTO users VALUES (51, 'late user')"

check "src: the processor holds all 16 leases" 16 \
    "$(q src "SELECT count(*) FROM changefeed.lease_acquire('users', 'billing', 'billing-1', '10 minutes')")"
check "src: every checkpoint moved past the initial position" 16 \
    "$(q src "SELECT count(*) FROM changefeed.lease WHERE processor = 'billing' AND checkpoint <> '$initial'")"
check "src: the checkpoint reads only what came after it" "51" \
    "$(q src "SELECT string_agg(DISTINCT r.doc_id, ',')
                FROM changefeed.lease l
               CROSS JOIN LATERAL changefeed.read('users', l.checkpoint, ranges => ARRAY[l.range_id]) r
               WHERE l.processor = 'billing'")"

src_xid=$(q src "SELECT pg_current_xact_id()")

echo "== pg_dump -Fc src"
if "$PGBIN/pg_dump" -Fc -d src -f "$scratch/src.dump" 2>"$scratch/pg_dump.err"; then
    pass "pg_dump exits 0"
else
    fail "pg_dump exits 0" "$(cat "$scratch/pg_dump.err")"
fi
state src >"$scratch/src.state"
check "src: the state to compare names 2 collections, 1 processor, 16 leases" "2 1 16" \
    "$(grep -c '^collection ' "$scratch/src.state") $(grep -c '^processor ' "$scratch/src.state") $(grep -c '^lease ' "$scratch/src.state")"
check "src: the log holds the 91 changes written" 91 "$(q src "SELECT count(*) FROM changefeed.log")"

# restore NAME TEMPLATE: makes the database and restores the dump into it.
restore() {
    local db=$1 template=$2 rc=0
    q postgres "CREATE DATABASE $db TEMPLATE $template"
    "$PGBIN/pg_restore" -d "$db" "$scratch/src.dump" >"$scratch/$db.restore.log" 2>&1 || rc=$?
    if [ "$rc" -eq 0 ] && ! grep -qi 'error' "$scratch/$db.restore.log"; then
        pass "$db: pg_restore exits 0 without errors"
    else
        fail "$db: pg_restore exits 0 without errors (exit $rc)" \
            "$(grep -iE -A3 '^pg_restore: error' "$scratch/$db.restore.log" | grep -v '^--$' | head -n 40)"
    fi
    check "$db: collections, processors and checkpoints come back as dumped" "$(cat "$scratch/src.state")" \
        "$(state "$db")"
    check "$db: the log, ticks, horizons, instances and applied ids start empty (not dumped)" "0 0 0 0 0" \
        "$(left_behind "$db")"
}

# checks DB CHECKPOINT_OUTCOME: what a user of the restored database relies on.
# Run on the source database too (after the dump), where they must all pass.
checks() {
    local db=$1 checkpoint_outcome=$2 pos out listed
    check "$db: collections lists both tables by name" "order_lines,users" \
        "$(try "$db" "SELECT string_agg(table_name::text, ',' ORDER BY table_name::text) FROM changefeed.collections" | sed 's/^OK //')"

    pos=$(try "$db" "SELECT changefeed.current_position()")
    if [ "${pos%% *}" = OK ]; then
        pos=${pos#OK }
        check "$db: writes to the enabled tables succeed" "OK |OK " \
            "$(try "$db" "INSERT INTO users VALUES (1001, 'after restore')")|$(
               try "$db" "INSERT INTO order_lines VALUES (1001, 1, 'sku-new', 5)")"
        check "$db: a new write to users is captured and read back" "OK 1001|create|after restore" \
            "$(try "$db" "SELECT doc_id || '|' || operation || '|' || (current->>'name')
                            FROM changefeed.read('users', '$pos')")"
        check "$db: a new write to order_lines (composite key) is captured and read back" \
            'OK ["1001","1"]|create|sku-new' \
            "$(try "$db" "SELECT doc_id || '|' || operation || '|' || (current->>'sku')
                            FROM changefeed.read('order_lines', '$pos')")"
    else
        fail "$db: current_position() works" "$pos"
    fi

    # The processor starts again: on a restored database its checkpoints are
    # positions of the old database, which must be refused, not read as empty.
    out=$(try "$db" "SELECT string_agg(DISTINCT r.doc_id, ',')
                       FROM changefeed.lease_acquire('users', 'billing', 'billing-1', '10 minutes') l
                      CROSS JOIN LATERAL changefeed.read('users', l.checkpoint, ranges => ARRAY[l.range_id]) r
                      WHERE r.operation = 'create'")
    echo "     reading from the checkpoint: $out"
    if [ "$checkpoint_outcome" = CF005 ]; then
        check "$db: reading from the restored checkpoint fails with CF005" CF005 "${out%% *}"
    else
        check "$db: reading from the checkpoint delivers what came after it" "$checkpoint_outcome" "$out"
    fi

    listed="SELECT count(*) FROM changefeed.collections WHERE table_name::text = 'order_lines' AND enabled"
    out=$(try "$db" "$listed")
    check "$db: disable works" "OK " "$(try "$db" "SELECT changefeed.disable('order_lines')")"
    check "$db: collections lists order_lines as enabled before disable, not after" "OK 1 -> OK 0" \
        "$out -> $(try "$db" "$listed")"
}

echo "== the same checks on the source database"
checks src "OK 1001,51"

echo "== restore into a database made from template0"
restore r_template0 template0
checks r_template0 CF005

echo "== restore into a database made from a template1 that has the extension"
q template1 "CREATE EXTENSION changefeed"
restore r_template1 template1
checks r_template1 CF005

echo "== restore into a new database on another cluster"
bash test/cluster.sh stop "$scratch/cluster"
eval "$(bash test/cluster.sh env "$scratch/elsewhere")"
restore r_elsewhere template0
# The restored history was written under transaction ids this cluster has not
# used yet: once its own ids pass them, it must still not be delivered as new.
pos=$(try r_elsewhere "SELECT changefeed.current_position()")
burn_xids postgres "$(( src_xid - $(q postgres "SELECT pg_current_xact_id()") + 5 ))"
try r_elsewhere "INSERT INTO users VALUES (2001, 'on the new server')" >/dev/null
check "r_elsewhere: the source's history is never delivered as new changes" "OK 2001:create" \
    "$(try r_elsewhere "SELECT string_agg(doc_id || ':' || operation, ',' ORDER BY seq)
                          FROM changefeed.read('users', '${pos#OK }')")"
checks r_elsewhere CF005

bash test/cluster.sh stop "$scratch/elsewhere"
stage_summary
