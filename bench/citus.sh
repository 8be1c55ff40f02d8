#!/usr/bin/env bash
# Scale-out, side by side in one run: capture and drain of a table on one
# server against the same table distributed by Citus over a coordinator and
# two workers (test/citus_cluster.sh; on one machine, so this measures what
# the cluster costs, not what more machines would add).
#   writes:  pgbench, CLIENTS clients upserting random keys of 100,000 (one row a
#            transaction), SECONDS a run, the table enabled or not, interleaved in ROUNDS;
#   drain:   the backlog the enabled runs left: on one server, a processor drains it
#            (feed_drain); on Citus, collect() moves it into the coordinator's feed,
#            then the same processor drains that.
#   bash bench/citus.sh [SECONDS] [ROUNDS] [CLIENTS]     (needs bench/out/bin: bash bench/run.sh --smoke)
# Prints a table of rates and ratios; writes its figures to $BENCH_OUT/citus.tsv.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
secs=${1:-20} rounds=${2:-3} clients=${3:-4}
bin=$BENCH_OUT/bin
[ -x "$bin/feed_drain" ] || { echo "bench/citus.sh: $bin/feed_drain missing: run bash bench/run.sh --smoke first" >&2; exit 2; }
export LD_LIBRARY_PATH=$BENCH_OUT/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=$BENCH_OUT/citus.tsv
: >"$out"
one=one citus=$(bench_dir citus)
# fsync off on both sides: test/citus_cluster.sh runs its nodes so.
BENCH_CONF="fsync = off" start_bench_cluster "$one" 0 yes
bash "$BENCH_ROOT/test/citus_cluster.sh" start "$citus" --port-base $((BENCH_PORT_BASE + 1)) >/dev/null
trap 'bench_cleanup; bash "$BENCH_ROOT/test/citus_cluster.sh" stop "$citus" >/dev/null 2>&1 || true' EXIT

conn_env "$one"
one_conn=$(bench_conninfo)
coord_conn="host=$citus/coordinator port=$((BENCH_PORT_BASE + 1)) user=postgres dbname=postgres"
sql() { psql -qXAt -v ON_ERROR_STOP=1 "$1" -c "$2"; }
setup="CREATE TABLE docs (id bigint PRIMARY KEY, v bigint NOT NULL, doc jsonb);
       CREATE TABLE docs_plain (LIKE docs INCLUDING ALL);"
sql "$one_conn" "CREATE EXTENSION changefeed; $setup
                 SELECT changefeed.enable('docs'); SELECT changefeed.lease_init('docs', 'drain');" >/dev/null
sql "$coord_conn" "SET citus.shard_count = 8; $setup
                   SELECT create_distributed_table('docs', 'id'), create_distributed_table('docs_plain', 'id');
                   SELECT changefeed.enable('docs'); SELECT changefeed.lease_init('docs', 'drain');" >/dev/null
for t in docs docs_plain; do
    cat >"$BENCH_OUT/citus-$t.sql" <<SQL
\set k random(1, 100000)
INSERT INTO $t (id, v, doc) VALUES (:k, 1, '{"name": "user", "n": 1}')
    ON CONFLICT (id) DO UPDATE SET v = $t.v + 1;
SQL
done
tps() {  # conninfo table -> transactions per second
    "$PGBIN/pgbench" -n -f "$BENCH_OUT/citus-$2.sql" -c "$clients" -j 2 -T "$secs" "$1" 2>/dev/null |
        sed -nE 's/^tps = ([0-9.]+).*/\1/p'
}
echo "citus bench: $rounds rounds of $secs s, $clients clients"
for r in $(seq "$rounds"); do
    for where in one citus; do
        conn=$one_conn
        [ "$where" = citus ] && conn=$coord_conn
        for t in docs_plain docs; do
            v=$(tps "$conn" "$t")
            printf 'citus\t%s\t%s\t%s\t%s\ttx/s\n' "$where" "$t" "$r" "$v" >>"$out"
            echo "round $r: $where $t $v tx/s"
        done
    done
done

backlog() { sql "$1" "SELECT count(*) FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id
                      WHERE c.relid = 'docs'::regclass AND l.op IN ('c', 'r', 'd')"; }
n_one=$(backlog "$one_conn")
read -r got s rate_one < <("$bin/feed_drain" changefeed "$one_conn" docs drain 1 "$n_one" default)
printf 'citus\tone\tdrain\t1\t%s\tchanges/s\n' "$rate_one" >>"$out"
start=$(date +%s.%N)
while [ "$(sql "$coord_conn" "SELECT changefeed.collect('docs', 20000)")" != 0 ]; do :; done
collect_s=$(echo "$(date +%s.%N) - $start" | bc)
n_citus=$(backlog "$coord_conn")
rate_collect=$(echo "scale=0; $n_citus / $collect_s" | bc)
read -r got s rate_drain < <("$bin/feed_drain" changefeed "$coord_conn" docs drain 1 "$n_citus" default)
printf 'citus\tcitus\tcollect\t1\t%s\tchanges/s\n' "$rate_collect" >>"$out"
printf 'citus\tcitus\tdrain\t1\t%s\tchanges/s\n' "$rate_drain" >>"$out"

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
m() { awk -F '\t' -v w="$1" -v t="$2" '$1 == "citus" && $2 == w && $3 == t && $6 == "tx/s" {print $5}' "$out" | median; }
one_plain=$(m one docs_plain) one_cf=$(m one docs) c_plain=$(m citus docs_plain) c_cf=$(m citus docs)
ratio() { echo "scale=3; $1 / $2" | bc; }
echo
echo "| measure | one server | Citus, 2 workers | Citus / one |"
echo "|---|---:|---:|---:|"
echo "| writes, no capture (tx/s, median) | $one_plain | $c_plain | $(ratio "$c_plain" "$one_plain")x |"
echo "| writes, captured (tx/s, median) | $one_cf | $c_cf | $(ratio "$c_cf" "$one_cf")x |"
echo "| captured / not captured | $(ratio "$one_cf" "$one_plain")x | $(ratio "$c_cf" "$c_plain")x | |"
echo "| drain by one processor (changes/s) | $rate_one | $rate_drain | $(ratio "$rate_drain" "$rate_one")x |"
echo "| collect() into the coordinator's feed (changes/s) | | $rate_collect | $(ratio "$rate_collect" "$rate_one")x of one server's drain |"
echo "backlogs: one server $n_one changes, Citus $n_citus changes"
