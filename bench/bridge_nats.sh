#!/usr/bin/env bash
# Part 5, the bridge into NATS JetStream: a backlog of N changes drained by one
# bridge (all-versions processor, batches of 1000, JSON envelopes published
# asynchronously and acknowledged before each checkpoint) into a local
# nats-server with JetStream (file storage), beside a raw loop publishing the
# same envelopes with the same publisher.  Reports changes per second.
#   bash bench/bridge_nats.sh N ROUNDS BIN_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
n=${1:-100000} rounds=${2:-1} bin=${3:?bench binaries}
start_bench_cluster bridge 5 yes
conn_env bridge
conninfo=$(bench_conninfo)
nats_port=$((BENCH_PORT_BASE + 6))
nats_dir=$(bench_dir nats)

for round in $(seq 1 "$rounds"); do
    rm -rf "$nats_dir"
    mkdir -p "$nats_dir"
    bench_background nats-server -js -sd "$nats_dir/store" -a 127.0.0.1 -p "$nats_port" -l "$nats_dir/nats.log" \
        >/dev/null 2>&1
    nats_pid=$bench_last_pid
    for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null && break
        sleep 0.1
    done
    psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS changefeed;
DROP TABLE IF EXISTS bn_cf;
CREATE TABLE bn_cf (id bigint PRIMARY KEY, doc jsonb);
SELECT changefeed.enable('bn_cf');
SELECT changefeed.lease_init('bn_cf', 'to-nats');
SQL
    psql -qX -v ON_ERROR_STOP=1 >/dev/null <<SQL
$(backlog_sql bn_cf "$n" 1000)
VACUUM ANALYZE bn_cf;
SQL
    sleep 2  # the notifier's last ticks
    out=$("$bin/bridge_nats" "$conninfo" bn_cf "nats://127.0.0.1:$nats_port" "$n")
    read -r _ got s rate batch < <(grep '^bridge ' <<<"$out")
    record bridge "bridge into JetStream" drain "$round" "$rate" changes/s
    echo "round $round  bridge  $got changes in ${s}s = $rate/s (mean batch $batch envelopes)"
    read -r _ got s rate < <(grep '^raw ' <<<"$out")
    record bridge "raw publisher loop" drain "$round" "$rate" changes/s
    echo "round $round  raw publisher loop  $got envelopes in ${s}s = $rate/s"
    bench_stop "$nats_pid"
done
