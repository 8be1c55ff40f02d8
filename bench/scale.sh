#!/usr/bin/env bash
# Scale, two parts on one cluster (track_commit_timestamp on):
#  a. 4 instances of one all-versions processor over a 64-range table while
#     pgbench writes RATE changes/s (transactions of 20 rows) for SECONDS_A,
#     sampled every second (bench/feed_scale): max and p99 of the changes not
#     yet handled and of how far behind the handlers ran (the oldest change
#     handled in the second: handled - written_at), and the rate pgbench sustained.
#  b. TABLES enabled tables, pgbench writing single-row transactions into one
#     chosen at random at TX_RATE/s for SECONDS_B, one notifier for all: a
#     listener on 4 of them (bench/feed_wake) measures commit-to-wake latency
#     (first half and second half of the run), the age of the newest tick and
#     the NOTIFY queue's usage, sampled every second.
#   bash bench/scale.sh BIN_DIR ROUNDS SECONDS_A RATE SECONDS_B TX_RATE TABLES
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bin=${1:?bench binaries} rounds=${2:-1} secs_a=${3:-300} rate=${4:-10000}
secs_b=${5:-60} tx_rate=${6:-1000} tables=${7:-200}
rows_per_tx=20
start_bench_cluster scale 3 yes
conn_env scale
echo "track_commit_timestamp = on" >>"$(bench_dir scale)/data/postgresql.conf"
bash "$BENCH_ROOT/test/cluster.sh" restart "$(bench_dir scale)"
conninfo=$(bench_conninfo)
work=$BENCH_OUT/scale
mkdir -p "$work"

psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
CREATE EXTENSION changefeed;
CREATE TABLE sc (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, doc jsonb);
SELECT changefeed.enable('sc', ranges => 64);
DO \$\$
BEGIN
    FOR t IN 1 .. $tables LOOP
        EXECUTE format('CREATE TABLE w_%s (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, doc jsonb)', t);
        PERFORM changefeed.enable(format('w_%s', t)::regclass);
    END LOOP;
END
\$\$;
SQL
echo "INSERT INTO sc (doc) SELECT jsonb_build_object('name', 'user ' || g, 'n', g) FROM generate_series(1, $rows_per_tx) g;" \
    >"$work/sc.sql"
printf '%s\n' "\\set t random(1, $tables)" \
    "INSERT INTO w_:t (doc) VALUES (jsonb_build_object('name', 'x', 'n', 1));" >"$work/w.sql"
pgbench_tps() {  # pgbench args...: runs it, prints the transactions/s it achieved
    "$PGBIN/pgbench" -n "$@" 2>/dev/null | awk '/^tps = / {printf "%.0f", $3; exit}'
}

for round in $(seq 1 "$rounds"); do
    # a. A fresh processor name each round: its leases start at the writes.
    rm -f "$work/ready"
    bench_background "$bin/feed_scale" "$conninfo" sc "scale$round" 4 "$((secs_a + 2))" "$work/ready" >"$work/out_a" 2>"$work/samples_a.tsv"
    consumer=$bench_last_pid
    for _ in $(seq 1 1200); do [ -e "$work/ready" ] && break; sleep 0.1; done
    [ -e "$work/ready" ] || { echo "scale: the 4 instances never split the 64 ranges" >&2; exit 1; }
    achieved=$(pgbench_tps -c 4 -j 2 -R "$((rate / rows_per_tx))" -T "$secs_a" -f "$work/sc.sql")
    bench_wait "$consumer"
    read -r samples max_pending p99_pending max_age p99_age handled <"$work/out_a"
    achieved=$((${achieved:-0} * rows_per_tx))
    v="4 instances x 64 ranges"
    record scale "$v" "target changes/s" "$round" "$rate" changes/s
    record scale "$v" "achieved changes/s" "$round" "$achieved" changes/s
    record scale "$v" "max lag s" "$round" "$max_age" s
    record scale "$v" "p99 lag s" "$round" "$p99_age" s
    record scale "$v" "max pending" "$round" "$max_pending" changes
    record scale "$v" "p99 pending" "$round" "$p99_pending" changes
    echo "round $round  $v  $achieved of $rate changes/s for ${secs_a}s, $samples samples:" \
         "lag max ${max_age}s p99 ${p99_age}s, pending max $max_pending p99 $p99_pending, handled $handled"

    # b. One notifier, many collections.
    bench_background "$bin/feed_wake" "$conninfo" 1 "$secs_b" w_1 w_2 w_3 w_4 >"$work/out_b"
    listener=$bench_last_pid
    sleep 1
    achieved=$(pgbench_tps -c 4 -j 2 -R "$tx_rate" -T "$secs_b" -f "$work/w.sql")
    bench_wait "$listener"
    read -r n p50 p95 p99 p99_first p99_second tick_age queue <"$work/out_b"
    v="$tables tables written at random"
    record scale "$v" "target tx/s" "$round" "$tx_rate" tx/s
    record scale "$v" "achieved tx/s" "$round" "${achieved:-0}" tx/s
    record scale "$v" "wake p50 ms" "$round" "$p50" ms
    record scale "$v" "wake p95 ms" "$round" "$p95" ms
    record scale "$v" "wake p99 ms" "$round" "$p99" ms
    record scale "$v" "wake p99 first half ms" "$round" "$p99_first" ms
    record scale "$v" "wake p99 second half ms" "$round" "$p99_second" ms
    record scale "$v" "max tick age s" "$round" "$tick_age" s
    record scale "$v" "max NOTIFY queue usage" "$round" "$queue" share
    echo "round $round  $v  $achieved of $tx_rate tx/s for ${secs_b}s, $n rows heard on 4 tables:" \
         "wake p50 $p50 p95 $p95 p99 $p99 ms (halves $p99_first / $p99_second), tick age max ${tick_age}s, queue $queue"
done
