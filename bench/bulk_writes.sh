#!/usr/bin/env bash
# Part 1b, bulk statements: one INSERT ... SELECT of N jsonb documents of
# about 200 bytes, one UPDATE of all of them, one DELETE of all of them, on a
# table without capture, with changefeed (images => 'full', the default, and
# images => 'keys': the log holds keys alone), with PgQ's trigger, and read by
# a wal2json logical slot (wal2json: default replica identity;
# wal2json_full: REPLICA IDENTITY FULL, the old rows in WAL), every variant
# interleaved in rounds on one cluster.  Records seconds per statement
# (commit included) and the WAL it wrote per row; the report gives the ratio
# to the same statement without capture, and for DELETE also the ratio to the
# plain INSERT of the same rows (the floor of writing every previous image).
#   bash bench/bulk_writes.sh ROWS ROUNDS
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rows=${1:-1000000} rounds=${2:-3}
variants=${BULK_VARIANTS:-none changefeed changefeed_keys pgq wal2json wal2json_full}
name=bulk
start_bench_cluster "$name" 2 yes
conn_env "$name"
detect_peers

psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION changefeed;
CREATE TABLE b_none (id bigint PRIMARY KEY, doc jsonb NOT NULL);
CREATE TABLE b_changefeed (LIKE b_none INCLUDING ALL);
CREATE TABLE b_pgq (LIKE b_none INCLUDING ALL);
CREATE TABLE b_wal2json (LIKE b_none INCLUDING ALL);
CREATE TABLE b_changefeed_keys (LIKE b_none INCLUDING ALL);
CREATE TABLE b_wal2json_full (LIKE b_none INCLUDING ALL);
ALTER TABLE b_wal2json_full REPLICA IDENTITY FULL;
SELECT changefeed.enable('b_changefeed');
SELECT changefeed.enable('b_changefeed_keys', images => 'keys', keep_previous => false);
SQL
if [ "$have_pgq" = yes ]; then
    psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION pgq;
SELECT pgq.create_queue('bulk_q');
CREATE TRIGGER capture AFTER INSERT OR UPDATE OR DELETE ON b_pgq
    FOR EACH ROW EXECUTE PROCEDURE pgq.jsontriga('bulk_q');
SQL
fi
[ "$have_w2j" = yes ] &&
    psql -qXAt -c "SELECT 1 FROM pg_create_logical_replication_slot('bulk_w2j', 'wal2json')" >/dev/null

# Seconds one statement takes, commit included (psql runs it in autocommit).
timed() {  # sql
    psql -qXAt -v ON_ERROR_STOP=1 -c '\timing on' -c "$1" | awk '/^Time:/ {printf "%.4f\n", $2 / 1000}'
}

statement() {  # op table
    case $1 in
        insert) echo "INSERT INTO $2 SELECT g, jsonb_build_object('name', 'user ' || g, 'email', 'user' || g || '@example.com',
                      'n', g, 'tags', jsonb_build_array('alpha', 'beta', 'gamma'), 'note', repeat('x', 80))
                      FROM generate_series(1, $rows) g" ;;
        update) echo "UPDATE $2 SET doc = jsonb_set(doc, '{n}', to_jsonb(id + 1))" ;;
        delete) echo "DELETE FROM $2" ;;
    esac
}

for round in $(seq 1 "$rounds"); do
    for variant in $variants; do
        [ "$variant" = pgq ] && [ "$have_pgq" = no ] && continue
        [ "${variant#wal2json}" != "$variant" ] && [ "$have_w2j" = no ] && continue
        table=b_$variant
        recv=
        if [ "${variant#wal2json}" != "$variant" ]; then
            # Decode only this variant's WAL, while it is written.
            slot_skip_to_now bulk_w2j
            bench_background "$PGBIN/pg_recvlogical" --slot bulk_w2j --start \
                -o format-version=2 -f /dev/null -d "$(bench_conninfo)"
            recv=$bench_last_pid
            sleep 0.5
        fi
        for op in insert update delete; do
            psql -qX -c "VACUUM $table" -c CHECKPOINT >/dev/null
            wal_from=$(psql -qXAt -c "SELECT pg_current_wal_lsn()")
            s=$(timed "$(statement "$op" "$table")")
            wal=$(psql -qXAt -c "SELECT round(pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal_from') / $rows)")
            record bulk "$variant" "$op" "$round" "$s" s
            record bulk_wal "$variant" "$op" "$round" "$wal" B
            echo "round $round  bulk $op  $variant  $s s  $wal B of WAL a row"
        done
        [ -n "$recv" ] && bench_stop "$recv"
        # The capture's own log and queue grow with every round: empty them
        # outside the timed statements so rounds stay alike.
        case $variant in
            changefeed*) psql -qX -c "TRUNCATE changefeed.log" -c "VACUUM $table" >/dev/null 2>&1 || true ;;
            pgq) psql -qX -c "SELECT pgq.maint_rotate_tables_step1('bulk_q')" >/dev/null 2>&1 || true ;;
        esac
    done
done
