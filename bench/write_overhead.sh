#!/usr/bin/env bash
# Write overhead of capture, measured side by side in one run:
# pgbench single-row updates of a 100k-row jsonb table, plain vs enabled,
# interleaved in rounds, reported as the median TPS ratio.
#   bash bench/write_overhead.sh [seconds per run] [rounds] [clients]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20} rounds=${2:-3} clients=${3:-8}
dir=/tmp/changefeed-bench-write
bash test/install-deps.sh
make -s && make -s install >/dev/null
bash test/cluster.sh start "$dir" --port 55470 --conf "synchronous_commit = ${SYNC:-on}"
trap 'bash test/cluster.sh stop "$dir" >/dev/null 2>&1 || true' EXIT
eval "$(bash test/cluster.sh env "$dir")"
PGBENCH=/usr/lib/postgresql/15/bin/pgbench

psql -qX <<'SQL'
CREATE EXTENSION changefeed;
CREATE TABLE plain_docs (id int PRIMARY KEY, doc jsonb NOT NULL);
CREATE TABLE fed_docs (id int PRIMARY KEY, doc jsonb NOT NULL);
INSERT INTO plain_docs SELECT g, jsonb_build_object('name', 'user ' || g, 'n', g, 'tags', jsonb_build_array('a', 'b'))
  FROM generate_series(1, 100000) g;
INSERT INTO fed_docs SELECT * FROM plain_docs;
SELECT changefeed.enable('fed_docs') IS NOT NULL;
VACUUM ANALYZE;
SQL
for t in plain_docs fed_docs; do
    cat >"$dir/$t.sql" <<SQL
\set id random(1, 100000)
UPDATE $t SET doc = jsonb_set(doc, '{n}', to_jsonb(:id + 1)) WHERE id = :id;
SQL
done
run() { "$PGBENCH" -n -c "$clients" -j 2 -T "$secs" -f "$dir/$1.sql" 2>/dev/null | awk '/^tps/ {print $3}'; }
declare -a plain fed
for r in $(seq 1 "$rounds"); do
    p=$(run plain_docs); f=$(run fed_docs)
    plain+=("$p"); fed+=("$f")
    echo "round $r: plain $p tps, changefeed $f tps"
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mp=$(median "${plain[@]}"); mf=$(median "${fed[@]}")
echo "median: plain $mp tps, changefeed $mf tps, ratio $(awk -v a="$mf" -v b="$mp" 'BEGIN {printf "%.3f", a/b}')x"
