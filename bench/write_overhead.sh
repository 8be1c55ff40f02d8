#!/usr/bin/env bash
# Part 1, write overhead: pgbench on a jsonb table (single-row update and
# insert, 8 clients, synchronous_commit on and off), every capture variant
# interleaved in rounds (A B C ... A B C ...) on the same clusters; the
# logical decoding peer with the default replica identity (wal2json) and with
# REPLICA IDENTITY FULL (wal2json-full, the old row in WAL).  Documents
# of about 100 bytes; then, for no capture, changefeed and PgQ, documents of
# about 2 KB (cases named "... 2KB"; DOC_2KB=no skips them).
#   bash bench/write_overhead.sh ROWS SECONDS ROUNDS CLIENTS
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rows=${1:-100000} secs=${2:-15} rounds=${3:-3} clients=${4:-8}
sync_modes=${SYNC_MODES:-on off}
doc_2kb=${DOC_2KB:-yes}
# About 1.8 KB of text that does not compress: the tuple stays under the TOAST
# threshold, so the 2 KB cases measure the bytes written, not compression.
body=$(for i in $(seq 1 56); do printf '%s' "$i" | md5sum | cut -c1-32; done | tr -d '\n')
pre=pre plain=plain
start_bench_cluster "$pre" 0 yes
start_bench_cluster "$plain" 1 no

setup_sql() {  # the tables of one cluster; $1 = preloaded|plain
    cat <<SQL
CREATE EXTENSION changefeed;
CREATE EXTENSION pgq;
SELECT pgq.create_queue('bench_q');
CREATE TABLE seed (id int PRIMARY KEY, doc jsonb NOT NULL);
INSERT INTO seed SELECT g, jsonb_build_object('name', 'user ' || g, 'email', 'user' || g || '@example.com',
                                              'n', g, 'tags', jsonb_build_array('a', 'b', 'c'))
  FROM generate_series(1, $rows) g;
CREATE TABLE pl_log (id bigserial, txid xid8 NOT NULL DEFAULT pg_current_xact_id(), op text,
                     doc jsonb, at timestamptz NOT NULL DEFAULT now());
CREATE FUNCTION pl_capture() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
    INSERT INTO pl_log (op, doc) VALUES (TG_OP, to_jsonb(NEW));
    PERFORM pg_notify('pl_log', '');
    RETURN NULL;
END \$\$;
DO \$\$
DECLARE t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['t_none', 't_changefeed', 't_pgq', 't_plpgsql', 't_wal2json', 't_wal2json_full'] LOOP
        EXECUTE format('CREATE TABLE %I (id bigint PRIMARY KEY, doc jsonb NOT NULL)', t);
        EXECUTE format('INSERT INTO %I SELECT * FROM seed', t);
        EXECUTE format('CREATE SEQUENCE %I START 100000000', t || '_ins');
    END LOOP;
    IF '$doc_2kb' = 'yes' THEN
        FOREACH t IN ARRAY ARRAY['t_none_2k', 't_changefeed_2k', 't_pgq_2k'] LOOP
            EXECUTE format('CREATE TABLE %I (id bigint PRIMARY KEY, doc jsonb NOT NULL)', t);
            EXECUTE format('INSERT INTO %I SELECT id, doc || jsonb_build_object(''body'', %L) FROM seed', t, '$body');
            EXECUTE format('CREATE SEQUENCE %I START 100000000', t || '_ins');
        END LOOP;
        PERFORM changefeed.enable('t_changefeed_2k');
        CREATE TRIGGER capture AFTER INSERT OR UPDATE OR DELETE ON t_pgq_2k
            FOR EACH ROW EXECUTE PROCEDURE pgq.jsontriga('bench_q');
    END IF;
END \$\$;
SELECT changefeed.enable('t_changefeed');
ALTER TABLE t_wal2json_full REPLICA IDENTITY FULL;
CREATE TRIGGER capture AFTER INSERT OR UPDATE OR DELETE ON t_pgq
    FOR EACH ROW EXECUTE PROCEDURE pgq.jsontriga('bench_q');
CREATE TRIGGER capture AFTER INSERT OR UPDATE ON t_plpgsql FOR EACH ROW EXECUTE FUNCTION pl_capture();
VACUUM ANALYZE;
CHECKPOINT;
SQL
}
conn_env "$pre"; setup_sql | psql -qX -v ON_ERROR_STOP=1 >/dev/null
psql -qXAt -c "SELECT 'slot', lsn FROM pg_create_logical_replication_slot('bench_w2j', 'wal2json')" >/dev/null
conn_env "$plain"; setup_sql | psql -qX -v ON_ERROR_STOP=1 >/dev/null

work=$BENCH_OUT/pgbench
mkdir -p "$work"
for t in t_none t_changefeed t_pgq t_plpgsql t_wal2json t_wal2json_full; do
    cat >"$work/update_$t.sql" <<SQL
\set id random(1, $rows)
UPDATE $t SET doc = jsonb_set(doc, '{n}', to_jsonb(:id + 1)) WHERE id = :id;
SQL
    cat >"$work/insert_$t.sql" <<SQL
INSERT INTO $t VALUES (nextval('${t}_ins'), jsonb_build_object('name', 'new', 'n', 1, 'tags', jsonb_build_array('a')));
SQL
done
for t in t_none_2k t_changefeed_2k t_pgq_2k; do
    cat >"$work/update_$t.sql" <<SQL
\set id random(1, $rows)
UPDATE $t SET doc = jsonb_set(doc, '{n}', to_jsonb(:id + 1)) WHERE id = :id;
SQL
    cat >"$work/insert_$t.sql" <<SQL
INSERT INTO $t VALUES (nextval('${t}_ins'), jsonb_build_object('name', 'new', 'n', 1, 'body', '$body'));
SQL
done

# One pgbench run; prints TPS.
bench() {  # cluster workload table sync
    conn_env "$1"
    PGOPTIONS="-c synchronous_commit=$4" "$PGBIN/pgbench" -n -c "$clients" -j 2 -T "$secs" \
        -f "$work/$2_$3.sql" 2>/dev/null | awk '/^tps/ {print $3}'
}

for round in $(seq 1 "$rounds"); do
    for sync in $sync_modes; do
        for workload in update insert; do
            case_name="$workload sync=$sync"
            for variant in none changefeed changefeed-no-preload pgq plpgsql-notify wal2json wal2json-full none-no-preload; do
                case $variant in
                    none) tps=$(bench "$pre" "$workload" t_none "$sync") ;;
                    changefeed) tps=$(bench "$pre" "$workload" t_changefeed "$sync") ;;
                    pgq) tps=$(bench "$pre" "$workload" t_pgq "$sync") ;;
                    plpgsql-notify) tps=$(bench "$pre" "$workload" t_plpgsql "$sync") ;;
                    changefeed-no-preload) tps=$(bench "$plain" "$workload" t_changefeed "$sync") ;;
                    none-no-preload) tps=$(bench "$plain" "$workload" t_none "$sync") ;;
                    wal2json*)
                        conn_env "$pre"
                        # Decode only this run's WAL: skip what other variants wrote.
                        slot_skip_to_now bench_w2j
                        bench_background "$PGBIN/pg_recvlogical" --slot bench_w2j --start \
                            -o format-version=2 -f /dev/null -d "$(bench_conninfo)"
                        recv=$bench_last_pid
                        sleep 0.5
                        table=t_wal2json
                        [ "$variant" = wal2json-full ] && table=t_wal2json_full
                        tps=$(bench "$pre" "$workload" "$table" "$sync")
                        bench_stop "$recv"
                        ;;
                esac
                record write "$variant" "$case_name" "$round" "$tps" tps
                echo "round $round  $case_name  $variant  $tps tps"
            done
            [ "$doc_2kb" = yes ] || continue
            for variant in none changefeed pgq; do
                tps=$(bench "$pre" "$workload" "t_${variant}_2k" "$sync")
                record write "$variant" "$case_name 2KB" "$round" "$tps" tps
                echo "round $round  $case_name 2KB  $variant  $tps tps"
            done
        done
    done
done
