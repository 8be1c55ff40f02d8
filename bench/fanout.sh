#!/usr/bin/env bash
# Fan-out: many hot subscriptions in one process against a few.  One program
# holds SMALL subscriptions on one table and LARGE on another (half of each
# filtered), and times each round's write until every subscription of its
# set saw it, the two sets in turn (program: fanout.cpp).
#   bash bench/fanout.sh BIN_DIR ROUNDS SMALL LARGE
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bin=${1:?bench binaries} rounds=${2:-20} small=${3:-10} large=${4:-500}
start_bench_cluster fanout 0 yes
conn_env fanout
conninfo=$(bench_conninfo)
psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS changefeed;
CREATE TABLE fan_small (id int PRIMARY KEY, kind text);
CREATE TABLE fan_large (id int PRIMARY KEY, kind text);
SELECT changefeed.enable('fan_small', ranges => 16);
SELECT changefeed.enable('fan_large', ranges => 16);
SQL
round=0
while read -r variant ms; do
    [ "$variant" = small ] && round=$((round + 1))
    n=$small
    [ "$variant" = large ] && n=$large
    record fanout "$n" all-saw-one-write "$round" "$ms" ms
done < <("$bin/fanout" "$conninfo" fan_small "$small" fan_large "$large" "$rounds")
echo "fanout: $(grep -c '^fanout	' "$BENCH_OUT/raw.tsv") figures; load average $(cut -d' ' -f1-3 /proc/loadavg)"
