#!/usr/bin/env bash
# Retention cost: dropping a day's partition of N captured changes with
# changefeed.prune() vs DELETE of the same rows, measured side by side in one
# run on one cluster.  Prints a markdown table (times include the commit).
#   bash bench/prune.sh [sizes...]      default: 10000 100000 1000000
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000 1000000)
dir=/tmp/changefeed-bench-prune
bash test/install-deps.sh
make -s && make -s install >/dev/null
bash test/cluster.sh start "$dir" --port 55471 --conf "changefeed.maintain_interval = 0" --conf "max_wal_size = 4GB"
trap 'bash test/cluster.sh stop "$dir" >/dev/null 2>&1 || true' EXIT
eval "$(bash test/cluster.sh env "$dir")"

# Captures n changes into today's partition; prints nothing.
fill() {
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
# Milliseconds of one statement, commit included.
timed() {
    psql -qX -c '\timing on' -c "$1" | awk '/^Time:/ {print $2}'
}

echo "| rows | prune (DROP partition) ms | DELETE ms | DELETE / prune |"
echo "|---:|---:|---:|---:|"
for n in "${sizes[@]}"; do
    fill "$n"
    p=$(timed "SELECT changefeed.prune(now() + interval '10 days')")
    fill "$n"
    d=$(timed "DELETE FROM changefeed.log WHERE written_at < now() + interval '9 days'")
    echo "| $n | $p | $d | $(awk -v a="$d" -v b="$p" 'BEGIN {printf "%.1fx", a/b}') |"
done
