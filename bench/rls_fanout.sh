#!/usr/bin/env bash
# Fan-out under row-level security: one process (fanout.cpp) holds N hot
# subscriptions of role bench_tenant, bound by a policy on a setting of its
# sessions (tenant = current_setting('app.tenant'), 'a' here), and N of role
# bench_all, whose policy passes every row (USING (true)); both non-superuser
# changefeed_reader roles, each set on a table of its own with the same two
# policies (half of each set filtered, as in fanout.sh).  Each round writes one
# row of tenant 'a' (which both sets may see) to each table in turn and times
# it until every subscription of its set saw it; reports the medians and the
# ratio restricted / unrestricted.
#   bash bench/rls_fanout.sh BIN_DIR ROUNDS N
set -euo pipefail
source "$(dirname "$0")/lib.sh"
bin=${1:?bench binaries} rounds=${2:-20} n=${3:-100}
start_bench_cluster rls_fanout 4 yes
conn_env rls_fanout
conninfo=$(bench_conninfo)
reader() { echo "host=$PGHOST port=$PGPORT user=$1 dbname=postgres options='-c app.tenant=a'"; }
tables=""
for t in rf_tenant rf_all; do
    tables+="
CREATE TABLE $t (id int PRIMARY KEY, kind text, tenant text NOT NULL DEFAULT 'a');
ALTER TABLE $t ENABLE ROW LEVEL SECURITY;
CREATE POLICY by_tenant ON $t FOR SELECT TO bench_tenant USING (tenant = current_setting('app.tenant', true));
CREATE POLICY all_rows ON $t FOR SELECT TO bench_all USING (true);
GRANT SELECT ON $t TO bench_tenant, bench_all;
SELECT changefeed.enable('$t', ranges => 16);"
done
psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS changefeed;
CREATE ROLE bench_tenant LOGIN IN ROLE changefeed_reader;
CREATE ROLE bench_all LOGIN IN ROLE changefeed_reader;
$tables
SQL
# The policies bind: of a row of tenant 'b' and one of 'a', bench_tenant's
# feed holds only the second, bench_all's both.
pos=$(psql -AtX -c "SELECT changefeed.current_position()")
psql -qX -v ON_ERROR_STOP=1 -c "INSERT INTO rf_tenant VALUES (-1, 'cold', 'b'), (-2, 'cold', 'a')"
while read -r role want; do
    got=$(PGUSER=$role PGOPTIONS='-c app.tenant=a' psql -AtX -v ON_ERROR_STOP=1 \
        -c "SELECT string_agg(doc_id::text, ',' ORDER BY seq) FROM changefeed.read('rf_tenant', '$pos')")
    [ "$got" = "$want" ] || { echo "rls_fanout: $role reads rows $got of rf_tenant, not $want" >&2; exit 1; }
done <<<"bench_tenant -2
bench_all -1,-2"
declare -A ms
round=0
while read -r set t; do
    [ "$set" = small ] && round=$((round + 1))
    variant="$n restricted by a policy on a setting"
    [ "$set" = large ] && variant="$n unrestricted (USING (true))"
    record rls_fanout "$variant" all-saw-one-write "$round" "$t" ms
    ms[$set]="${ms[$set]:-} $t"
done < <("$bin/fanout" "$conninfo" rf_tenant "$n" rf_all "$n" "$rounds" "$(reader bench_tenant)" "$(reader bench_all)")
# shellcheck disable=SC2086
restricted=$(median ${ms[small]}) unrestricted=$(median ${ms[large]})
awk -v r="$restricted" -v u="$unrestricted" -v n="$n" 'BEGIN {
    printf "rls_fanout: median ms until all %d saw one write: restricted %.1f, unrestricted %.1f (%.2fx the time)\n", n, r, u, r / u}'
echo "rls_fanout: load average $(cut -d' ' -f1-3 /proc/loadavg)"
