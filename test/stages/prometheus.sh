#!/usr/bin/env bash
# The alerts of docs/prometheus/alerts.yaml, by promtool and by a real
# Prometheus.
#   promtool checks the rules and runs docs/prometheus/alerts_test.yaml.
#   Then a cluster with one collection (retention 60 s), postgres_exporter
#   with docs/prometheus/queries.yaml, a service running a processor with
#   changefeed::PrometheusMetrics (client/examples/metrics_service.cpp), and
#   Prometheus scraping both every second with the shipped rules (their `for:`
#   shortened to 1 s, their expressions as shipped).  The service stops while
#   rows are written, then starts again.
# Checked: promtool passes; Prometheus scrapes the client's series and the
# exporter's; no alert fires while the service runs; with it stopped the
# ranges lose their lease (ChangefeedRangeWithoutLease) and the waiting
# changes age past half the retention (ChangefeedLagHalfOfRetention); started
# again, the service catches up and both resolve.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/prometheus.sh [--port N] [--build-dir DIR] [--no-build] [--keep]
# The cluster takes port N, the exporter N + 1, the service N + 2, Prometheus N + 3.
# Installs prometheus and prometheus-postgres-exporter if missing.
# Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source test/support/checks.sh
port=55466 build_dir=build build=1 keep=0
parse_options prometheus.sh --port=port --build-dir=build_dir --no-build=build:0 --keep=keep:1 -- "$@"
debian_packages prometheus prometheus-postgres-exporter
[ "$build" = 0 ] || cmake_targets "$build_dir" metrics_service
service_bin=$(built_program prometheus.sh "$build_dir" metrics_service)

echo "== promtool: the rules, and their unit tests"
check "promtool check rules" yes "$(promtool check rules docs/prometheus/alerts.yaml >/dev/null 2>&1 && echo yes || echo no)"
out=$(cd docs/prometheus && promtool test rules alerts_test.yaml 2>&1) && ok=yes || ok=no
check "promtool test rules alerts_test.yaml" yes "$ok"
[ "$ok" = yes ] || echo "$out" | head -30

stage_scratch prometheus
db=$scratch/db
pids=()
finish() {
    local p
    for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]+"${pids[@]}"}"; do wait "$p" 2>/dev/null || true; done
    stage_cleanup "$db"
}
trap finish EXIT
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$db" -p "$port" -U postgres -d postgres -c "$1"; }

bash test/cluster.sh start "$db" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 0"
q "CREATE EXTENSION changefeed"
q "CREATE TABLE orders (id int PRIMARY KEY, total numeric)"
q "SELECT changefeed.enable('orders', ranges => 2, retention => '60 seconds')" >/dev/null
conninfo="host=$db port=$port user=postgres dbname=postgres"

DATA_SOURCE_NAME="$conninfo sslmode=disable" runuser -u postgres -- prometheus-postgres-exporter \
    --web.listen-address="127.0.0.1:$((port + 1))" --extend.query-path="$(pwd)/docs/prometheus/queries.yaml" \
    >"$scratch/exporter.log" 2>&1 &
pids+=($!)
service=
# start_service: starts it and waits until it serves its metrics; a service
# that exits first fails the stage with its log.
start_service() {
    : >"$scratch/service.log"
    "$service_bin" "$conninfo" public.orders --name billing --listen "127.0.0.1:$((port + 2))" \
        >>"$scratch/service.log" 2>&1 &
    service=$!
    pids+=("$service")
    for _ in $(seq 300); do
        grep -q "^metrics on port" "$scratch/service.log" && return 0
        kill -0 "$service" 2>/dev/null || break
        sleep 0.1
    done
    echo "the service did not start serving its metrics; its log:"
    tail -20 "$scratch/service.log"
    exit 1
}
start_service

# The shipped rules with their waits shortened; the expressions unchanged.
sed -E 's/^( +for: ).*/\11s/' docs/prometheus/alerts.yaml >"$scratch/alerts.yaml"
cat >"$scratch/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [$scratch/alerts.yaml]
scrape_configs:
  - job_name: postgres
    static_configs: [{targets: ['127.0.0.1:$((port + 1))']}]
  - job_name: service
    static_configs: [{targets: ['127.0.0.1:$((port + 2))']}]
EOF
prometheus --config.file="$scratch/prometheus.yml" --storage.tsdb.path="$scratch/tsdb" \
    --web.listen-address="127.0.0.1:$((port + 3))" >"$scratch/prometheus.log" 2>&1 &
pids+=($!)
api="http://127.0.0.1:$((port + 3))/api/v1"
# value QUERY: the first result's value of a PromQL query ("" when none).
value() {
    curl -sf --get "$api/query" --data-urlencode "query=$1" |
        python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")' 2>/dev/null ||
        true
}
# firing: the names of the firing alerts, sorted, space-separated.
firing() {
    curl -sf "$api/alerts" | python3 -c 'import json,sys
print(" ".join(sorted({a["labels"]["alertname"] for a in json.load(sys.stdin)["data"]["alerts"] if a["state"] == "firing"})))' 2>/dev/null ||
        true
}
# wait_until SECONDS COMMAND...: runs COMMAND every half second until it succeeds.
wait_until() {
    local n=$(( $1 * 2 ))
    shift
    for _ in $(seq "$n"); do "$@" && return 0; sleep 0.5; done
    return 1
}
has() { [ "$(value "$1")" = "$2" ]; }

echo "== Prometheus scrapes the exporter and the service"
wait_until 60 has 'sum(changefeed_processor_live{table="public.orders",processor="billing"})' 2 || true
check "the exporter's series: retention of public.orders" 60 \
    "$(value 'changefeed_collection_retention_seconds{table="public.orders"}')"
check "the exporter's series: both ranges of billing live" 2 \
    "$(value 'sum(changefeed_processor_live{table="public.orders",processor="billing"})')"
wait_until 30 has 'count(changefeed_instance_info{table="public.orders",processor="billing"})' 1 || true
check "the client's series: billing's instance" 1 \
    "$(value 'count(changefeed_instance_info{table="public.orders",processor="billing"})')"
check "the workers are counted" 2 "$(value 'count(changefeed_worker_running)')"
q "INSERT INTO orders SELECT i, i FROM generate_series(1, 10) i"
sleep 3
check "nothing fires while the service reads" "" "$(firing)"

echo "== the service stops; rows are written"
check "the service ran until stopped" yes "$(kill "$service" 2>/dev/null && echo yes || echo no)"
wait "$service" 2>/dev/null || true
q "INSERT INTO orders SELECT i, i FROM generate_series(11, 20) i"
fires() { [[ " $(firing) " == *" $1 "* ]]; }
wait_until 30 fires ChangefeedRangeWithoutLease || true
check "ChangefeedRangeWithoutLease fires" yes "$(fires ChangefeedRangeWithoutLease && echo yes || echo no)"
wait_until 60 fires ChangefeedLagHalfOfRetention || true
check "ChangefeedLagHalfOfRetention fires (the waiting changes are over 30 s old)" yes \
    "$(fires ChangefeedLagHalfOfRetention && echo yes || echo no)"
echo "   firing: $(firing)"

echo "== the service starts again and catches up"
start_service
resolved() { [ -z "$(firing)" ]; }
wait_until 60 resolved || true
check "every alert resolved" "" "$(firing)"
check "the service delivered the rows written while it was down" 10 \
    "$(grep -cE '^(create|replace) (1[1-9]|20)$' "$scratch/service.log" || true)"
[ "$failed" = 0 ] || { echo "the service's log:"; tail -20 "$scratch/service.log"; }

stage_summary
