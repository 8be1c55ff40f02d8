#!/usr/bin/env bash
# Part 5, many ranges: for each range count, 4 all-versions processor
# instances under one name started together on a fresh table:
#   burst   seconds to handle one INSERT of N rows once the ranges are split
#   split   ms from starting the 4 to an even split, then from adding a 5th
#   idle    CPU ms over S seconds of one idle instance owning every range:
#           the process (getrusage) and its server sessions (/proc)
#   bash bench/ranges.sh BIN_DIR ROUNDS N S "16 256 1024"
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bin=${1:?bench binaries} rounds=${2:-3} n=${3:-5000} idle_secs=${4:-10} counts=${5:-"16 256 1024"}
start_bench_cluster ranges 3 yes
conn_env ranges
conninfo=$(bench_conninfo)

fresh_table() {  # name ranges
    psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS changefeed;
DROP TABLE IF EXISTS $1;
CREATE TABLE $1 (id int PRIMARY KEY, v text);
SELECT changefeed.enable('$1', ranges => $2);
SQL
}
drop_table() { psql -qX -c "SELECT changefeed.disable('$1'); DROP TABLE $1" >/dev/null; }

for round in $(seq 1 "$rounds"); do
    for r in $counts; do
        fresh_table "rb_$r" "$r"
        secs=$("$bin/ranges_bench" burst "$conninfo" "rb_$r" 4 "$n")
        record ranges burst "$r" "$round" "$secs" s
        drop_table "rb_$r"
        fresh_table "rs_$r" "$r"
        read -r start_ms join_ms < <("$bin/ranges_bench" split "$conninfo" "rs_$r" 4)
        record ranges split-start "$r" "$round" "$start_ms" ms
        record ranges split-join "$r" "$round" "$join_ms" ms
        drop_table "rs_$r"
        fresh_table "ri_$r" "$r"
        read -r client_ms server_ms < <("$bin/ranges_bench" idle "$conninfo" "ri_$r" "$idle_secs")
        record ranges idle-client "$r" "$round" "$client_ms" "ms CPU/${idle_secs}s"
        record ranges idle-server "$r" "$round" "$server_ms" "ms CPU/${idle_secs}s"
        drop_table "ri_$r"
    done
done
echo "ranges: $(grep -c '^ranges	' "$BENCH_OUT/raw.tsv") figures; load average $(cut -d' ' -f1-3 /proc/loadavg)"
