#!/usr/bin/env bash
# Part 3, consumer throughput: a backlog of N changes drained by 1, 2 and 4
# changefeed processor instances under one name (no-op handler), by PgQ batch
# reads, by pg_recvlogical + wal2json, and a raw COPY of the same log rows
# (the limit).  Reports changes per second.  The backlog is written in
# transactions of TX_ROWS rows (1000 by default; variants are named by it
# unless it is 1000).
#   bash bench/throughput.sh N ROUNDS BIN_DIR [TX_ROWS]
set -euo pipefail
source "$(dirname "$0")/lib.sh"
n=${1:-1000000} rounds=${2:-1} bin=${3:?bench binaries} tx=${4:-1000}
suffix=
[ "$tx" = 1000 ] || suffix=" ($tx-row tx)"
tick_every=$(( tx >= 10000 ? 1 : 10000 / tx ))
start_bench_cluster throughput 3 yes
conn_env throughput
conninfo=$(bench_conninfo)
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }
now() { date +%s.%N; }

for round in $(seq 1 "$rounds"); do
    psql -qX -v ON_ERROR_STOP=1 >/dev/null 2>&1 <<SQL
DROP EXTENSION IF EXISTS changefeed CASCADE;
DROP EXTENSION IF EXISTS pgq CASCADE;
DROP TABLE IF EXISTS tp_cf, tp_pgq, tp_w2j;
SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = 'bench_tp';
CREATE EXTENSION changefeed;
CREATE EXTENSION pgq;
SELECT pgq.create_queue('tp_q');
SELECT pgq.register_consumer('tp_q', 'drain');
CREATE TABLE tp_cf (id bigint PRIMARY KEY, doc jsonb);
CREATE TABLE tp_pgq (id bigint PRIMARY KEY, doc jsonb);
CREATE TABLE tp_w2j (id bigint PRIMARY KEY, doc jsonb);
SELECT changefeed.enable('tp_cf');
SELECT changefeed.lease_init('tp_cf', 'drain0'), changefeed.lease_init('tp_cf', 'drain1'), changefeed.lease_init('tp_cf', 'drain2'),
       changefeed.lease_init('tp_cf', 'drain4');
CREATE TRIGGER capture AFTER INSERT ON tp_pgq FOR EACH ROW EXECUTE PROCEDURE pgq.jsontriga('tp_q');
SELECT pg_create_logical_replication_slot('bench_tp', 'wal2json');
SQL
    # The backlog: N changes per table in transactions of $tx rows (PgQ ticks
    # every 10000 rows).
    psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET synchronous_commit = off;
DO \$\$
BEGIN
    FOR t IN 0 .. ($n - 1) / $tx LOOP
        INSERT INTO tp_cf SELECT g, jsonb_build_object('name', 'user ' || g, 'n', g, 'tags', jsonb_build_array('a', 'b'))
          FROM generate_series(t * $tx + 1, least(t * $tx + $tx, $n)) g;
        INSERT INTO tp_pgq SELECT * FROM tp_cf WHERE id > t * $tx AND id <= t * $tx + $tx;
        INSERT INTO tp_w2j SELECT * FROM tp_cf WHERE id > t * $tx AND id <= t * $tx + $tx;
        COMMIT;
        IF t % $tick_every = $tick_every - 1 THEN PERFORM pgq.ticker(); COMMIT; END IF;
    END LOOP;
    PERFORM pgq.ticker();
END
\$\$;
VACUUM ANALYZE;
CHECKPOINT;
SQL
    sleep 2  # the notifier's last ticks
    read -r got s rate < <("$bin/feed_drain" changefeed "$conninfo" tp_cf drain0 1 "$n" default)
    record throughput "changefeed x1, default options$suffix" drain "$round" "$rate" changes/s
    echo "round $round  changefeed x1 default options  $got changes in ${s}s = $rate/s"
    for instances in 1 2 4; do
        read -r got s rate < <("$bin/feed_drain" changefeed "$conninfo" tp_cf "drain$instances" "$instances" "$n")
        record throughput "changefeed x$instances$suffix" drain "$round" "$rate" changes/s
        echo "round $round  changefeed x$instances  $got changes in ${s}s = $rate/s"
    done

    read -r got s rate < <("$bin/feed_drain" pgq "$conninfo" tp_q drain "$n")
    record throughput "pgq$suffix" drain "$round" "$rate" changes/s
    echo "round $round  pgq  $got events in ${s}s = $rate/s"

    end_lsn=$(psql -qXAt -c "SELECT pg_current_wal_lsn()")
    t0=$(now)
    "$PGBIN/pg_recvlogical" --slot bench_tp --start -o format-version=2 -o add-tables=public.tp_w2j \
        --endpos "$end_lsn" -f /dev/null -d "$conninfo"
    s=$(secs "$t0" "$(now)")
    rate=$(awk -v n="$n" -v s="$s" 'BEGIN {printf "%.0f", n / s}')
    record throughput "wal2json$suffix" drain "$round" "$rate" changes/s
    echo "round $round  wal2json  $n changes in ${s}s = $rate/s"

    t0=$(now)
    psql -qX -c "\\copy (SELECT * FROM changefeed.log WHERE collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'tp_cf'::regclass)) TO '/dev/null'"
    s=$(secs "$t0" "$(now)")
    rate=$(awk -v n="$n" -v s="$s" 'BEGIN {printf "%.0f", n / s}')
    record throughput "raw COPY of the log$suffix" drain "$round" "$rate" changes/s
    echo "round $round  raw COPY  $n rows in ${s}s = $rate/s"
done
