#!/usr/bin/env bash
# Part 2, commit-to-handler latency at a fixed write rate: a changefeed
# processor vs a PgQ consumer (pgqd at its defaults and at its fastest tick)
# vs pg_recvlogical + wal2json, and the floor: INSERT + NOTIFY (the row's id
# as payload) in one transaction, received by LISTEN on a bare connection.
# Latency = handler time - commit timestamp.  Writers commit with
# synchronous_commit = on; the commit timestamp is taken just before the
# commit's WAL flush, so every figure includes that flush.  Figures are
# recorded per rate ("200/s p50"), with the rate pgbench achieved.
#   bash bench/latency.sh RATE SECONDS ROUNDS BIN_DIR [VARIANTS]
# VARIANTS: any of "floor changefeed changefeed-listen pgq wal2json" (default all), measured in
# that order each round.  changefeed: the processor's reads wait in the server for the next commit
# (long poll, the default); changefeed-listen: the same processor woken by the notifier's NOTIFY
# (long_poll = false), on a table of its own.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rate=${1:-1000} secs=${2:-20} rounds=${3:-3} bin=${4:?bench binaries}
variants=${5:-floor changefeed changefeed-listen pgq wal2json}
start_bench_cluster latency 2 yes
conn_env latency
echo "track_commit_timestamp = on" >>"$(bench_dir latency)/data/postgresql.conf"
bash "$BENCH_ROOT/test/cluster.sh" restart "$(bench_dir latency)"
conninfo=$(bench_conninfo)
pgqd_pid=

psql -qX -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE EXTENSION changefeed;
CREATE EXTENSION pgq;
SELECT pgq.create_queue('lat_q');
SELECT pgq.register_consumer('lat_q', 'latency');
CREATE TABLE lat_cf (id bigint PRIMARY KEY, doc jsonb);
CREATE TABLE lat_cf_listen (id bigint PRIMARY KEY, doc jsonb);
CREATE TABLE lat_pgq (id bigint PRIMARY KEY, doc jsonb);
CREATE TABLE lat_w2j (id bigint PRIMARY KEY, doc jsonb);
CREATE TABLE lat_floor (id bigint PRIMARY KEY, doc jsonb);
CREATE SEQUENCE lat_ids;
SELECT changefeed.enable('lat_cf');
SELECT changefeed.enable('lat_cf_listen');
CREATE TRIGGER capture AFTER INSERT ON lat_pgq FOR EACH ROW EXECUTE PROCEDURE pgq.jsontriga('lat_q');
SELECT pg_create_logical_replication_slot('bench_lat', 'wal2json');
SQL

work=$BENCH_OUT/latency
mkdir -p "$work"
for t in lat_cf lat_cf_listen lat_pgq lat_w2j; do
    echo "INSERT INTO $t VALUES (nextval('lat_ids'), jsonb_build_object('name', 'x', 'n', 1));" >"$work/$t.sql"
done
# The floor: one statement, one transaction, the NOTIFY committed with the row.
echo "WITH i AS (INSERT INTO lat_floor VALUES (nextval('lat_ids'), jsonb_build_object('name', 'x', 'n', 1)) RETURNING id)
      SELECT pg_notify('lat_floor', id::text) FROM i;" | tr -s ' \n' ' ' >"$work/lat_floor.sql"
write() {  # table; sets $achieved (transactions/s)
    achieved=$("$PGBIN/pgbench" -n -c 4 -j 2 -R "$rate" -T "$secs" -f "$work/$1.sql" 2>/dev/null \
        | awk '/^tps = / {printf "%.0f", $3; exit}')
}
start_pgqd() {  # ticker period
    cat >"$work/pgqd.ini" <<INI
[pgqd]
logfile = $work/pgqd.log
pidfile = $work/pgqd.pid
base_connstr = host=$PGHOST port=$PGPORT user=postgres
initial_database = postgres
database_list = postgres
ticker_period = $1
INI
    bench_background pgqd "$work/pgqd.ini" >/dev/null 2>&1
    pgqd_pid=$bench_last_pid
}
stop_pgqd() { bench_stop "$pgqd_pid"; pgqd_pid=; }
measure() {  # variant, then the consumer command; the consumer runs a bit longer than the writes
    local variant=$1
    shift
    bench_background "$@" >"$work/out"
    local consumer=$bench_last_pid
    sleep 1
    write "$table"
    bench_wait "$consumer"
    read -r n p50 p95 p99 <"$work/out"
    record latency "$variant" "$rate/s p50" "$round" "$p50" ms
    record latency "$variant" "$rate/s p95" "$round" "$p95" ms
    record latency "$variant" "$rate/s p99" "$round" "$p99" ms
    record latency "$variant" "$rate/s achieved" "$round" "${achieved:-0}" tx/s
    echo "round $round  $rate/s ($achieved/s achieved)  $variant  n=$n  p50=$p50 p95=$p95 p99=$p99 ms"
}
wanted() { [[ " $variants " == *" $1 "* ]]; }

for round in $(seq 1 "$rounds"); do
    if wanted floor; then
        table=lat_floor
        measure floor "$bin/feed_latency" notify "$conninfo" lat_floor "$((secs + 3))"
    fi

    if wanted changefeed; then
        table=lat_cf
        measure changefeed "$bin/feed_latency" changefeed "$conninfo" lat_cf "$((secs + 3))"
    fi

    if wanted changefeed-listen; then
        table=lat_cf_listen
        measure changefeed-listen "$bin/feed_latency" changefeed-listen "$conninfo" lat_cf_listen "$((secs + 3))"
    fi

    if wanted pgq; then
        table=lat_pgq
        psql -qX -c "SELECT pgq.set_queue_config('lat_q', 'ticker_max_lag', '3 seconds')" >/dev/null
        start_pgqd 1
        measure pgq-pgqd-default "$bin/feed_latency" pgq "$conninfo" lat_q lat_pgq "$((secs + 6))"
        stop_pgqd
        # The fastest PgQ can go: a tick whenever the ticker runs, the ticker as often as pgqd allows.
        psql -qX -c "SELECT pgq.set_queue_config('lat_q', 'ticker_max_lag', '0')" >/dev/null
        start_pgqd 0.001
        measure pgq-pgqd-fastest "$bin/feed_latency" pgq "$conninfo" lat_q lat_pgq "$((secs + 3))"
        stop_pgqd
    fi

    if wanted wal2json; then
        table=lat_w2j
        psql -qXAt -c "SELECT pg_replication_slot_advance('bench_lat', pg_current_wal_lsn())" >/dev/null
        measure wal2json bash -c "timeout $((secs + 3)) '$PGBIN/pg_recvlogical' --slot bench_lat --start \
            -o format-version=2 -o add-tables=public.lat_w2j -F 0 -s 1 -f - -d '$conninfo' 2>/dev/null \
            | '$bin/feed_latency' wal2json '$conninfo' lat_w2j $((secs + 3))"
    fi
done
