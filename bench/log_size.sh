#!/usr/bin/env bash
# Read cost independent of the log's size: the same drain (CHANGES changes of
# collection A in 1000-row transactions, one all-versions processor with the
# default options, bench/feed_drain) in two databases of one cluster: one
# whose log holds nothing else, one whose log holds OTHER rows of another
# enabled collection B, written before A's.  Variants interleaved per round
# (a fresh collection A in each database every round); reports changes/s of
# both and the ratio.
#   bash bench/log_size.sh OTHER CHANGES ROUNDS BIN_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
other=${1:-10000000} n=${2:-100000} rounds=${3:-3} bin=${4:?bench binaries}
start_bench_cluster log_size 1 yes
conn_env log_size
declare -A db=([empty]=lsize_empty [full]=lsize_full)
db_conninfo() { echo "host=$PGHOST port=$PGPORT user=postgres dbname=$1"; }
sql() { psql -qX -v ON_ERROR_STOP=1 -d "$1" >/dev/null; }  # database; SQL on stdin

for variant in empty full; do
    psql -qX -c "CREATE DATABASE ${db[$variant]}" >/dev/null
    echo "CREATE EXTENSION changefeed;" | sql "${db[$variant]}"
done
# B: OTHER changes as fast as the server takes them (one enabled table, big
# transactions, no wait for the WAL flush).
t0=$(date +%s)
sql "${db[full]}" <<SQL
CREATE TABLE b (id bigint PRIMARY KEY, doc jsonb);
SELECT changefeed.enable('b');
SET synchronous_commit = off;
DO \$\$
BEGIN
    FOR t IN 0 .. ($other - 1) / 500000 LOOP
        INSERT INTO b SELECT g, jsonb_build_object('name', 'user ' || g, 'n', g)
          FROM generate_series(t * 500000 + 1, least(t * 500000 + 500000, $other)) g;
        COMMIT;
    END LOOP;
END
\$\$;
VACUUM ANALYZE;
CHECKPOINT;
SQL
echo "log_size: $other rows of b written in $(( $(date +%s) - t0 )) s;" \
     "log $(psql -qXAt -d "${db[full]}" -c "SELECT pg_size_pretty(sum(pg_total_relation_size(c.oid)))
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'changefeed.log'::regclass")"

declare -A rates label=([empty]="empty log" [full]="$other rows of another collection")
for round in $(seq 1 "$rounds"); do
    for variant in empty full; do
        a=a_$round
        sql "${db[$variant]}" <<SQL
CREATE TABLE $a (id bigint PRIMARY KEY, doc jsonb);
SELECT changefeed.enable('$a');
SELECT changefeed.lease_init('$a', 'drain');
$(backlog_sql "$a" "$n" 1000)
ANALYZE;
SQL
        sleep 2  # the notifier's last ticks
        read -r got s rate < <("$bin/feed_drain" changefeed "$(db_conninfo "${db[$variant]}")" "$a" drain 1 "$n" default)
        record log_size "${label[$variant]}" drain "$round" "$rate" changes/s
        rates[$variant]="${rates[$variant]:-} $rate"
        echo "round $round  $variant log  $got changes in ${s}s = $(printf '%.0f' "$rate")/s"
    done
done
# shellcheck disable=SC2086
empty=$(median ${rates[empty]}) full=$(median ${rates[full]})
awk -v e="$empty" -v f="$full" -v o="$other" \
    'BEGIN {printf "median: empty log %.0f/s, with %d other rows %.0f/s, ratio %.3f\n", e, o, f, f / e}'
