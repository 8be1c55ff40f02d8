#!/usr/bin/env bash
# Logical replication into enabled tables: the apply worker writes in replica
# mode, which plain triggers ignore.  On the publisher's side, publications that
# would ship the extension's own tables are refused (CF024); by schema, the
# initial table sync lands in the subscriber's feed.  A table enabled with replicated => true
# captures the applied rows; a table enabled without it refuses the apply
# (CF014): the subscription's worker fails and the rows are not applied, so
# nothing is applied without being captured.
#
#   bash test/stages/replication.sh [--port N]     (needs the extension installed)
set -euo pipefail
cd "$(dirname "$0")/../.."
port=55492
[ "${1:-}" = --port ] && port=$2

dir=$(mktemp -d /tmp/changefeed-replication.XXXXXX)
chmod 755 "$dir"
trap 'bash test/cluster.sh stop "$dir/cluster" --immediate >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bash test/cluster.sh start "$dir/cluster" --port "$port" --fsync-off \
    --conf "wal_level = logical" --conf "changefeed.maintain_interval = 0" \
    --conf "wal_retrieve_retry_interval = '200ms'"
eval "$(bash test/cluster.sh env "$dir/cluster")"

q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$1" -c "$2"; }
failed=0
check() {  # name, expected, actual
    if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: expected '$2', got '$3'"; failed=1; fi
}
wait_for() {  # db, sql, expected value; up to 30 s
    for _ in $(seq 300); do
        [ "$(q "$1" "$2")" = "$3" ] && return 0
        sleep 0.1
    done
    return 1
}

q postgres "CREATE DATABASE origin"
q postgres "CREATE DATABASE replica"
for db in origin replica; do
    q "$db" "CREATE EXTENSION changefeed"
    q "$db" "CREATE TABLE mirrored (id int PRIMARY KEY, v text); CREATE TABLE unguarded (id int PRIMARY KEY, v text)"
done
q replica "SELECT changefeed.enable('mirrored', replicated => true)" >/dev/null
q replica "SELECT changefeed.enable('unguarded')" >/dev/null
q origin "CREATE PUBLICATION pub_mirrored FOR TABLE mirrored; CREATE PUBLICATION pub_unguarded FOR TABLE unguarded"
# Both ends share one cluster: CREATE SUBSCRIPTION cannot create its slot itself.
q origin "SELECT pg_create_logical_replication_slot('slot_mirrored', 'pgoutput')" >/dev/null
q origin "SELECT pg_create_logical_replication_slot('slot_unguarded', 'pgoutput')" >/dev/null
conn="host=$PGHOST port=$PGPORT user=postgres dbname=origin"
q replica "CREATE SUBSCRIPTION sub_mirrored CONNECTION '$conn' PUBLICATION pub_mirrored
           WITH (create_slot = false, slot_name = 'slot_mirrored', copy_data = false)"
q replica "CREATE SUBSCRIPTION sub_unguarded CONNECTION '$conn' PUBLICATION pub_unguarded
           WITH (create_slot = false, slot_name = 'slot_unguarded', copy_data = false)"

q origin "INSERT INTO mirrored VALUES (1, 'one'), (2, 'two'); UPDATE mirrored SET v = 'zwei' WHERE id = 2;
          DELETE FROM mirrored WHERE id = 1"
q origin "INSERT INTO unguarded VALUES (1, 'one'), (2, 'two')"

if wait_for replica "SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM mirrored" "2=zwei"; then
    echo "ok   replicated rows applied"
else
    echo "FAIL replicated rows not applied"; failed=1
fi
check "applied rows are in the feed" "create 1,create 2,replace 2,delete 1" \
    "$(q replica "SELECT string_agg(op || ' ' || doc_id, ',' ORDER BY seq)
                   FROM (SELECT l.seq, l.doc_id, CASE l.op WHEN 'c' THEN 'create' WHEN 'r' THEN 'replace'
                                                          WHEN 'd' THEN 'delete' END AS op
                           FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id
                          WHERE c.relid = 'mirrored'::regclass) x")"

# The refused apply: the worker fails with CF014 (and retries); nothing lands.
refused=no
for _ in $(seq 300); do
    if grep -q 'write to public.unguarded with session_replication_role = replica would escape capture' \
        "$dir/cluster/server.log"; then refused=yes; break; fi
    sleep 0.1
done
check "apply into a table enabled without replicated => true is refused (CF014 in the log)" yes "$refused"
sleep 1
check "refused rows are not applied" 0 "$(q replica "SELECT count(*) FROM unguarded")"
check "nothing of them in the feed" 0 "$(q replica "SELECT count(*) FROM changefeed.log l
    JOIN changefeed.collection c ON c.id = l.collection_id WHERE c.relid = 'unguarded'::regclass")"

# The publisher's side.  FOR ALL TABLES would ship the extension's own tables
# to subscribers: refused (CF024), and so is CREATE EXTENSION beside one.
verbose() { psql -X -q -v VERBOSITY=verbose -At -d "$1" -c "$2" 2>&1 || true; }
check "FOR ALL TABLES refused where changefeed is (CF024)" yes \
    "$(verbose origin "CREATE PUBLICATION pub_all FOR ALL TABLES" | grep -q 'ERROR:  CF024' && echo yes || echo no)"
q postgres "CREATE DATABASE bystander"
q bystander "SET client_min_messages = error; CREATE PUBLICATION pub_everything FOR ALL TABLES"
check "CREATE EXTENSION beside a FOR ALL TABLES publication refused (CF024)" yes \
    "$(verbose bystander "CREATE EXTENSION changefeed" | grep -q 'ERROR:  CF024' && echo yes || echo no)"
check "and nothing of it left" 0 "$(q bystander "SELECT count(*) FROM pg_namespace WHERE nspname = 'changefeed'")"

# By schema instead, with the initial table sync (copy_data): the copied rows
# and what follows arrive in the subscriber's feed as creates.
for db in origin replica; do q "$db" "CREATE SCHEMA shop; CREATE TABLE shop.synced (id int PRIMARY KEY, v text)"; done
q replica "SELECT changefeed.enable('shop.synced', replicated => true)" >/dev/null
q origin "INSERT INTO shop.synced VALUES (1, 'a'), (2, 'b'), (3, 'c')"
q origin "SET client_min_messages = error; CREATE PUBLICATION pub_shop FOR TABLES IN SCHEMA shop"
q origin "SELECT pg_create_logical_replication_slot('slot_shop', 'pgoutput')" >/dev/null
q replica "CREATE SUBSCRIPTION sub_shop CONNECTION '$conn' PUBLICATION pub_shop
           WITH (create_slot = false, slot_name = 'slot_shop', copy_data = true)"
q origin "INSERT INTO shop.synced VALUES (4, 'd')"
if wait_for replica "SELECT count(*) FROM shop.synced" 4; then
    echo "ok   initial sync and later rows applied"
else
    echo "FAIL initial sync: $(q replica "SELECT count(*) FROM shop.synced") rows"; failed=1
fi
check "synced rows are in the feed as creates" "create 1,create 2,create 3,create 4" \
    "$(q replica "SELECT string_agg('create ' || l.doc_id, ',' ORDER BY l.doc_id)
                   FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id
                  WHERE c.relid = 'shop.synced'::regclass AND l.op = 'c'")"
check "and nothing else" 4 "$(q replica "SELECT count(*) FROM changefeed.log l
    JOIN changefeed.collection c ON c.id = l.collection_id WHERE c.relid = 'shop.synced'::regclass")"
q replica "ALTER SUBSCRIPTION sub_shop DISABLE; ALTER SUBSCRIPTION sub_shop SET (slot_name = NONE); DROP SUBSCRIPTION sub_shop"

q replica "ALTER SUBSCRIPTION sub_mirrored DISABLE; ALTER SUBSCRIPTION sub_unguarded DISABLE"
q replica "ALTER SUBSCRIPTION sub_mirrored SET (slot_name = NONE); ALTER SUBSCRIPTION sub_unguarded SET (slot_name = NONE)"
q replica "DROP SUBSCRIPTION sub_mirrored; DROP SUBSCRIPTION sub_unguarded"
bash test/cluster.sh stop "$dir/cluster"

if [ "$failed" -ne 0 ]; then echo "replication test FAILED"; exit 1; fi
echo "replication test passed"
