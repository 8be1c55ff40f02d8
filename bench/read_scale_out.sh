#!/usr/bin/env bash
# Part 9, read scale-out: a backlog of N changes drained by one processor
# reading the primary and by one reading a hot standby (read_connection; its
# leases and checkpoints on the primary), and the CPU the primary's processes
# spent in each drain (utime + stime of the postmaster and its children, the
# exited ones included, from /proc).  The standby streams asynchronously and
# has replayed the backlog before the drains.  Reports changes per second and
# the primary's CPU seconds per drain.
#   bash bench/read_scale_out.sh N ROUNDS BIN_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
n=${1:-200000} rounds=${2:-1} bin=${3:?bench binaries}
start_bench_cluster scaleout 3 yes
primary=$(bench_dir scaleout)
standby=$(bench_dir scaleout-standby)
bench_clusters+=("$standby")
psql_p() { psql -qXAt -v ON_ERROR_STOP=1 -h "$primary" -p "$(cat "$primary/port")" -U postgres -d postgres "$@"; }
psql_s() { psql -qXAt -v ON_ERROR_STOP=1 -h "$standby" -p "$(cat "$standby/port")" -U postgres -d postgres "$@"; }
psql_p -c "CREATE EXTENSION changefeed" >/dev/null
bash "$BENCH_ROOT/test/cluster.sh" standby "$primary" "$standby" --port $((BENCH_PORT_BASE + 4))
conn_p="host=$primary port=$(cat "$primary/port") user=postgres dbname=postgres"
conn_s="host=$standby port=$(cat "$standby/port") user=postgres dbname=postgres"

# CPU ticks of a postmaster and its children (live ones, and the waited-for
# exited ones in its cutime/cstime): /proc/PID/stat fields 4 ppid, 14 utime,
# 15 stime, 16 cutime, 17 cstime (comm, field 2, is "(postgres)": no spaces).
tree_ticks() {  # data directory
    local pm
    pm=$(head -1 "$1/postmaster.pid")
    for f in /proc/[0-9]*/stat; do cat "$f" 2>/dev/null || true; done | awk -v pm="$pm" '
        $2 != "(postgres)" { next }
        $1 == pm { t += $14 + $15 + $16 + $17 }
        $4 == pm { t += $14 + $15 }
        END { print t + 0 }'
}
hz=$(getconf CLK_TCK)
cpu_secs() { awk -v a="$1" -v b="$2" -v hz="$hz" 'BEGIN {printf "%.2f", (b - a) / hz}'; }

wait_replayed() {
    local lsn
    lsn=$(psql_p -c "SELECT pg_current_wal_lsn()")
    for _ in $(seq 600); do
        [ "$(psql_s -c "SELECT pg_last_wal_replay_lsn() >= '$lsn'::pg_lsn")" = t ] && return 0
        sleep 0.1
    done
    echo "read_scale_out: the standby did not replay the backlog" >&2
    return 1
}

for round in $(seq 1 "$rounds"); do
    psql_p >/dev/null <<SQL
DROP TABLE IF EXISTS so_cf;
CREATE TABLE so_cf (id bigint PRIMARY KEY, doc jsonb);
SELECT changefeed.enable('so_cf');
SELECT changefeed.lease_init('so_cf', 'via_primary'), changefeed.lease_init('so_cf', 'via_standby');
SET synchronous_commit = off;
$(backlog_sql so_cf "$n" 1000)
VACUUM ANALYZE so_cf;
CHECKPOINT;
SQL
    wait_replayed
    sleep 1  # the notifier's last wake-ups
    for via in primary standby; do
        extra=()
        [ "$via" = standby ] && extra=("read=$conn_s")
        t0=$(tree_ticks "$primary/data") s0=$(tree_ticks "$standby/data")
        read -r got s rate < <("$bin/feed_drain" changefeed "$conn_p" so_cf "via_$via" 1 "$n" "${extra[@]}")
        t1=$(tree_ticks "$primary/data") s1=$(tree_ticks "$standby/data")
        cpu=$(cpu_secs "$t0" "$t1") scpu=$(cpu_secs "$s0" "$s1")
        record readscale "drain via the $via" drain "$round" "$rate" changes/s
        record readscale "drain via the $via" "primary cpu" "$round" "$cpu" s
        record readscale "drain via the $via" "standby cpu" "$round" "$scpu" s
        echo "round $round  via the $via  $got changes in ${s}s = $rate/s; primary CPU ${cpu}s, standby CPU ${scpu}s"
    done
done
