#!/usr/bin/env bash
# pg_repack of an enabled table under concurrent writes: the feed keeps every
# write and gains none.
#   pg_repack copies the table into a new heap, replays the writes made
#   meanwhile from a log its own trigger fills, and swaps the two heaps'
#   files in the catalog.  The table keeps its oid and its triggers, so
#   capture goes on through the swap; the copy and the replay write only to
#   pg_repack's own tables, which are not enabled.
#   An audit trigger beside changefeed's records each row written by the
#   load (pgbench, four clients: upserts, updates and deletes at random).
#   pg_repack rebuilds the table twice while the load runs (in key order,
#   then with --no-order), and its indexes once (--only-indexes).
# Checked: the table was rebuilt (new file); the changes read from before
# the load are exactly the audited writes, as a multiset of (transaction,
# operation, key, value); folding them gives the table's final rows;
# verify() finds capture intact; a write after the repacks is captured.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/repack.sh [--port N] [--keep]
# Installs postgresql-15-repack if missing.
# Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source test/support/checks.sh
stage_options repack.sh 55480 "$@"
debian_extensions postgresql-15-repack

stage_scratch repack
db=$scratch/db
trap 'stage_cleanup "$db"' EXIT

q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$db" -p "$port" -U postgres -d postgres -c "$1"; }

bash test/cluster.sh start "$db" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 0"
q "CREATE EXTENSION changefeed"
q "CREATE EXTENSION pg_repack"
q "CREATE TABLE items (id int PRIMARY KEY, val int NOT NULL, pad text)"
q "CREATE INDEX items_val ON items (val)"
q "INSERT INTO items SELECT i, i, repeat('p', 200) FROM generate_series(1, 100000) i"
q "SELECT changefeed.enable('items')" >/dev/null
# The writes as the load made them, recorded apart from changefeed.
q "CREATE TABLE audit (txid xid8, op text, id int, val int);
   CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS \$\$
   BEGIN
       IF TG_OP = 'DELETE' THEN
           INSERT INTO audit VALUES (pg_current_xact_id(), 'delete', OLD.id, OLD.val);
       ELSE
           INSERT INTO audit VALUES (pg_current_xact_id(), lower(TG_OP), NEW.id, NEW.val);
       END IF;
       RETURN NULL;
   END \$\$"
q "CREATE TRIGGER audit AFTER INSERT OR UPDATE OR DELETE ON items FOR EACH ROW EXECUTE FUNCTION audit()"
before=$(q "SELECT changefeed.current_position()")
file_before=$(q "SELECT pg_relation_filenode('items')")

cat >"$scratch/load.sql" <<'EOF'
\set id random(1, 120000)
\set v random(1, 1000000)
\set op random(1, 3)
\if :op = 1
INSERT INTO items VALUES (:id, :v, 'load') ON CONFLICT (id) DO UPDATE SET val = excluded.val;
\elif :op = 2
UPDATE items SET val = :v WHERE id = :id;
\else
DELETE FROM items WHERE id = :id;
\endif
EOF
chmod 644 "$scratch/load.sql"

echo "== pg_repack three times under a load of four writers"
"$PGBIN/pgbench" -n -h "$db" -p "$port" -U postgres -c 4 -T 3600 -f "$scratch/load.sql" postgres \
    >"$scratch/pgbench.log" 2>&1 &
load=$!
sleep 1
repacked=yes
for args in "" "--no-order" "--only-indexes"; do
    # shellcheck disable=SC2086
    if ! "$PGBIN/pg_repack" -h "$db" -p "$port" -U postgres -d postgres -t public.items $args \
        >>"$scratch/repack.log" 2>&1; then
        repacked=no
    fi
done
sleep 1
kill "$load" 2>/dev/null || true
wait "$load" || true
check "pg_repack succeeded each time" yes "$repacked"
[ "$repacked" = yes ] || cat "$scratch/repack.log"
check "the table was rebuilt (a new file)" yes \
    "$([ "$(q "SELECT pg_relation_filenode('items')")" != "$file_before" ] && echo yes || echo no)"
writes=$(q "SELECT count(*) FROM audit")
check "the load wrote while the repacks ran" yes "$([ "$writes" -gt 1000 ] && echo yes || echo no)"
echo "   $writes rows written by the load"

# The feed's changes since before the load, as the audit records them.
q "CREATE TABLE fed (page int, n bigint, txid xid8, op text, id int, val int, seq bigint, position text)"
q "DO \$\$
   DECLARE
       pos text := '$before';
       k int := 0;
   BEGIN
       LOOP
           k := k + 1;
           INSERT INTO fed
           SELECT k, n, txid,
                  CASE operation WHEN 'create' THEN 'insert' WHEN 'replace' THEN 'update' ELSE operation END,
                  (coalesce(current, previous) ->> 'id')::int, (coalesce(current, previous) ->> 'val')::int,
                  seq, position
             FROM changefeed.read('items', pos, max_changes => 100000) WITH ORDINALITY r
                  (seq, txid, range_id, operation, doc_id, partition_key, current, previous, ttl_expired,
                   written_at, tenant, position, event_id, n);
           EXIT WHEN NOT FOUND;
           pos := (SELECT f.position FROM fed f WHERE f.page = k ORDER BY f.n DESC LIMIT 1);
       END LOOP;
   END \$\$"
check "every audited write is in the feed" 0 \
    "$(q "SELECT count(*) FROM (SELECT txid, op, id, val FROM audit EXCEPT ALL SELECT txid, op, id, val FROM fed) x")"
check "the feed holds no write the load did not make" 0 \
    "$(q "SELECT count(*) FROM (SELECT txid, op, id, val FROM fed EXCEPT ALL SELECT txid, op, id, val FROM audit) x")"
check "the feed's last change of each key is the table's row" 0 \
    "$(q "WITH last AS (SELECT DISTINCT ON (id) id, op, val FROM fed ORDER BY id, txid DESC, seq DESC),
                touched AS (SELECT id, val FROM items WHERE id IN (SELECT id FROM fed))
          SELECT count(*) FROM (
              (SELECT id, val FROM last WHERE op <> 'delete' EXCEPT SELECT id, val FROM touched)
              UNION ALL (SELECT id, val FROM touched EXCEPT SELECT id, val FROM last WHERE op <> 'delete')) x")"
check "capture is intact" t "$(q "SELECT intact FROM changefeed.verify() WHERE table_name = 'items'::regclass")"
check "pg_repack left none of its objects on the table" \
    "audit,changefeed_capture,changefeed_capture_truncate" \
    "$(q "SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger WHERE tgrelid = 'items'::regclass
            AND NOT tgisinternal")"

echo "== a write after the repacks is captured"
last=$(q "SELECT position FROM fed ORDER BY page DESC, n DESC LIMIT 1")
q "UPDATE items SET val = -1 WHERE id = (SELECT min(id) FROM items)"
check "read as a replace with the new value" "replace -1" \
    "$(q "SELECT operation || ' ' || (current ->> 'val') FROM changefeed.read('items', '$last')")"

stage_summary
