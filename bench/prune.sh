#!/usr/bin/env bash
# Part 4, retention: dropping a day's partition of N captured changes with
# changefeed.prune() vs DELETE of the same rows, side by side on one cluster.
# Times include the commit.
#   bash bench/prune.sh ROUNDS SIZES...
set -euo pipefail
source "$(dirname "$0")/lib.sh"
rounds=${1:-1}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000 1000000)
start_bench_cluster prune 4 yes
conn_env prune

fill() {  # captures $1 changes into today's partition
    psql -qX >/dev/null 2>&1 <<SQL
DROP EXTENSION IF EXISTS changefeed CASCADE;
DROP TABLE IF EXISTS docs;
CREATE EXTENSION changefeed;
CREATE TABLE docs (id int PRIMARY KEY, doc jsonb);
SELECT changefeed.enable('docs', retention => '1 day');
INSERT INTO docs SELECT g, jsonb_build_object('n', g, 'name', 'document ' || g) FROM generate_series(1, $1) g;
VACUUM ANALYZE changefeed.log;
CHECKPOINT;
SQL
}
timed() { psql -qX -c '\timing on' -c "$1" | awk '/^Time:/ {print $2}'; }

for round in $(seq 1 "$rounds"); do
    for n in "${sizes[@]}"; do
        fill "$n"
        p=$(timed "SELECT changefeed.prune(now() + interval '10 days')")
        fill "$n"
        d=$(timed "DELETE FROM changefeed.log WHERE written_at < now() + interval '9 days'")
        record prune "changefeed.prune (DROP)" "$n rows" "$round" "$p" ms
        record prune "DELETE" "$n rows" "$round" "$d" ms
        echo "round $round  $n rows  prune $p ms  DELETE $d ms"
    done
done
