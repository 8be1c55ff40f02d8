#!/usr/bin/env bash
# Reads under an old open transaction: a backlog of N changes written in
# 100-row transactions, drained by one all-versions processor (feed_drain,
# batches of 1000), alone and while one other session holds a transaction
# that took an xid before the writes and stays open (idle in transaction)
# through the writes and the drain.  Variants interleaved per round; reports
# changes/s of both and the ratio open / alone.
#   bash bench/open_xact.sh N ROUNDS BIN_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
n=${1:-200000} rounds=${2:-3} bin=${3:?bench binaries}
start_bench_cluster open_xact 1 yes
conn_env open_xact
conninfo=$(bench_conninfo)

# Writes the backlog into a fresh table whose processor `drain` starts before it.
prepare() {
    psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS changefeed CASCADE;
DROP TABLE IF EXISTS ox;
CREATE EXTENSION changefeed;
CREATE TABLE ox (id bigint PRIMARY KEY, doc jsonb);
SELECT changefeed.enable('ox');
SELECT changefeed.lease_init('ox', 'drain');
SQL
}
write_backlog() {
    psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
$(backlog_sql ox "$n" 100)
ANALYZE;
SQL
    sleep 2  # the notifier's last ticks
}

declare -A rates
for round in $(seq 1 "$rounds"); do
    for variant in alone open; do
        prepare
        holder=
        if [ "$variant" = open ]; then
            # Idle in transaction with an xid, older than every change written.
            bench_background bash -c '{ echo "BEGIN; SELECT pg_current_xact_id();"; sleep 100000; } |
                                      PGAPPNAME=open_xact psql -qX >/dev/null' >/dev/null 2>&1
            holder=$bench_last_pid
            for _ in $(seq 1 100); do
                [ "$(psql -qXAt -c "SELECT count(*) FROM pg_stat_activity
                                     WHERE application_name = 'open_xact' AND backend_xid IS NOT NULL")" = 1 ] && break
                sleep 0.1
            done
        fi
        write_backlog
        read -r got s rate < <("$bin/feed_drain" changefeed "$conninfo" ox drain 1 "$n")
        [ -n "$holder" ] && bench_stop "$holder"
        record open_xact "$variant" drain "$round" "$rate" changes/s
        rates[$variant]="${rates[$variant]:-} $rate"
        echo "round $round  $variant  $got changes in ${s}s = $(printf '%.0f' "$rate")/s"
    done
done
# shellcheck disable=SC2086
alone=$(median ${rates[alone]}) open=$(median ${rates[open]})
awk -v a="$alone" -v o="$open" 'BEGIN {printf "median: alone %.0f/s, with an open transaction %.0f/s, ratio %.2f\n", a, o, o / a}'
