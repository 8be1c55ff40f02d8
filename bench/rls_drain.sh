#!/usr/bin/env bash
# Drain under row-level security: a backlog of N changes written in 100-row
# transactions, drained by one all-versions processor (feed_drain, batches of
# 1000) of a non-superuser role, on one table (a) without row-level security,
# (b) with a policy on a setting of the processor's session (evaluated in the
# scan) and (c) with a policy on a role-mapping table (a sublink: a statement
# per change).  Every policy passes every row, so each variant delivers the
# same N changes: the ratio is the cost of the policies alone.  Variants
# interleaved per round; reports changes/s and the ratio to (a).
#   bash bench/rls_drain.sh N ROUNDS BIN_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
n=${1:-200000} rounds=${2:-3} bin=${3:?bench binaries}
start_bench_cluster rls_drain 1 yes
conn_env rls_drain
conninfo="host=$PGHOST port=$PGPORT user=bench_rls dbname=postgres options='-c app.tenant=a'"

# A fresh table whose processor `drain`, owned by bench_rls, starts before the backlog.
prepare() {  # variant
    local policy=
    case $1 in
        setting) policy="CREATE POLICY p ON rd USING (tenant = current_setting('app.tenant', true));" ;;
        mapping) policy="CREATE POLICY p ON rd USING (tenant IN (SELECT m.tenant FROM public.rd_map m
                                                                   WHERE m.role_name = current_user));" ;;
    esac
    psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS changefeed CASCADE;
DROP TABLE IF EXISTS rd, rd_map;
DROP ROLE IF EXISTS bench_rls;
CREATE EXTENSION changefeed;
CREATE ROLE bench_rls LOGIN IN ROLE changefeed_processor;
CREATE TABLE rd (id bigint PRIMARY KEY, doc jsonb, tenant text NOT NULL DEFAULT 'a');
CREATE TABLE rd_map (role_name name, tenant text);
INSERT INTO rd_map VALUES ('bench_rls', 'a');
GRANT SELECT ON rd, rd_map TO bench_rls;
$( [ -n "$policy" ] && echo "ALTER TABLE rd ENABLE ROW LEVEL SECURITY; $policy" )
SELECT changefeed.enable('rd');
SET ROLE bench_rls;
SELECT changefeed.lease_init('rd', 'drain');
RESET ROLE;
SQL
}
write_backlog() {
    psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
$(backlog_sql rd "$n" 100)
ANALYZE;
SQL
    sleep 2  # the notifier's last ticks
}

declare -A rates
variants="whole setting mapping"
for round in $(seq 1 "$rounds"); do
    for variant in $variants; do
        prepare "$variant"
        write_backlog
        read -r got s rate < <("$bin/feed_drain" changefeed "$conninfo" rd drain 1 "$n")
        record rls_drain "$variant" drain "$round" "$rate" changes/s
        rates[$variant]="${rates[$variant]:-} $rate"
        echo "round $round  $variant  $got changes in ${s}s = $(printf '%.0f' "$rate")/s"
    done
done
# shellcheck disable=SC2086
whole=$(median ${rates[whole]}) setting=$(median ${rates[setting]}) mapping=$(median ${rates[mapping]})
awk -v w="$whole" -v s="$setting" -v m="$mapping" 'BEGIN {
    printf "median: no policy %.0f/s, policy on a setting %.0f/s (%.2fx), policy on a mapping table %.0f/s (%.2fx)\n",
           w, s, s / w, m, m / w}'
