#!/usr/bin/env bash
# Patroni 3.0 with etcd 3.4: two PostgreSQL nodes in synchronous mode, the
# library preloaded through Patroni's configuration, a processor on a
# multi-host connection string, and a writer that records what was
# acknowledged.  While it writes: a `patronictl switchover`, then a failover
# (the leader's Patroni and postmaster SIGKILLed), then the old leader comes
# back and rejoins as a replica through pg_rewind.
#   Before the failover, a transaction is committed on the leader with
#   synchronous_commit = local while the leader's WAL sender is frozen,
#   and a position is taken after it: a position of the history the failover
#   abandons (on a table the processor does not read, so that nothing of it
#   is delivered).
# Checked: every acknowledged write delivered, none that the final tables do
# not hold, the versions of one key first delivered in the order they were
# written; the processor ran on by itself through all three events (one
# process, never restarted); the old leader is a streaming replica again,
# rewound; the abandoned history's position is refused (CF017) on the new
# leader.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/patroni.sh [--port N] [--build-dir DIR] [--no-build] [--keep]
# Ports: PostgreSQL N and N+1, Patroni's REST API N+2 and N+3, etcd N+4 and N+5.
# Installs patroni, etcd-server and python3-etcd if missing.
# Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source test/support/checks.sh
port=55454 build_dir=build build=1 keep=0
parse_options patroni.sh --port=port --build-dir=build_dir --no-build=build:0 --keep=keep:1 -- "$@"
debian_packages patroni etcd-server python3-etcd
[ "$build" = 0 ] || cmake_targets "$build_dir" cf_processor_runner
runner_bin=$(built_program patroni.sh "$build_dir" cf_processor_runner)

stage_scratch patroni
etcd_port=$((port + 4))
pids=()
finish() {
    local p
    for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]+"${pids[@]}"}"; do wait "$p" 2>/dev/null || true; done
    pkill -KILL -f "$scratch/node" 2>/dev/null || true  # postmasters Patroni left behind
    if [ "$keep" = 1 ]; then echo "kept $scratch"; else rm -rf "$scratch"; fi
}
trap finish EXIT

echo "== etcd, and Patroni on two nodes"
etcd --name cf --data-dir "$scratch/etcd" --enable-v2=true \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((etcd_port + 1))" \
    --initial-cluster "cf=http://127.0.0.1:$((etcd_port + 1))" >"$scratch/etcd.log" 2>&1 &
pids+=($!)

# node N: Patroni's configuration of node N (1 or 2).
node_config() {
    local n=$1 pg=$((port + $1 - 1)) api=$((port + $1 + 1))
    cat <<EOF
scope: changefeed
name: node$n
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$api
  connect_address: 127.0.0.1:$api
etcd:
  host: 127.0.0.1:$etcd_port
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        shared_preload_libraries: changefeed
        changefeed.maintain_interval: 0
        wal_log_hints: 'on'
        max_wal_senders: 5
        max_replication_slots: 5
        hot_standby: 'on'
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$pg
  connect_address: 127.0.0.1:$pg
  data_dir: $scratch/node$n/data
  bin_dir: $PGBIN
  pgpass: $scratch/node$n/pgpass
  authentication:
    superuser: {username: postgres}
    replication: {username: postgres}
    rewind: {username: postgres}
  parameters:
    unix_socket_directories: $scratch/node$n
    fsync: 'off'
EOF
}
start_node() {
    mkdir -p "$scratch/node$1"
    node_config "$1" >"$scratch/node$1.yml"
    chown -R postgres "$scratch"
    runuser -u postgres -- patroni "$scratch/node$1.yml" >>"$scratch/node$1.log" 2>&1 &
    pids+=($!)
}
# role N: what Patroni's REST API says node N is ("master"/"primary", "replica"), state included.
role() { curl -s "http://127.0.0.1:$((port + $1 + 1))/patroni" |
             python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("role"), d.get("state"))' 2>/dev/null || true; }
leader() {  # the node number Patroni's leader is, or nothing
    local n
    for n in 1 2; do [[ "$(role "$n")" =~ ^(master|primary)\ running$ ]] && echo "$n" && return; done
}
wait_until() {  # SECONDS COMMAND...
    local n=$(( $1 * 2 ))
    shift
    for _ in $(seq "$n"); do "$@" && return 0; sleep 0.5; done
    return 1
}
streaming() {  # N: node N is a replica that streams from the leader, synchronously
    [ "$(role "$1")" = "replica running" ] &&
        [ "$(psql -qXAt -h 127.0.0.1 -p "$(( port + $(leader) - 1 ))" -U postgres -d postgres \
               -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'" 2>/dev/null)" = 1 ]
}
is_leader() { [ "$(leader)" = "$1" ]; }
start_node 1
wait_until 90 is_leader 1 || { echo "patroni.sh: node1 never led"; tail -20 "$scratch/node1.log"; exit 1; }
start_node 2
wait_until 120 streaming 2 || { echo "patroni.sh: node2 never streamed"; tail -20 "$scratch/node2.log"; exit 1; }
check "node1 leads, node2 streams synchronously" "1 replica running" "$(leader) $(role 2)"

multi="host=127.0.0.1,127.0.0.1 port=$port,$((port + 1)) user=postgres dbname=postgres target_session_attrs=read-write connect_timeout=2"
lq() { psql -qXAt -v ON_ERROR_STOP=1 -d "$multi" -c "$1"; }
on() { psql -qXAt -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(( port + $1 - 1 ))" -U postgres -d postgres -c "$2"; }
lq "CREATE EXTENSION changefeed"
lq "CREATE TABLE docs (id int PRIMARY KEY, v text)"
lq "CREATE TABLE other (id int PRIMARY KEY)"
lq "SELECT changefeed.enable('docs', ranges => 4), changefeed.enable('other')" >/dev/null
lq "INSERT INTO docs VALUES (0, '0')"
check "the library is preloaded through Patroni's configuration" changefeed "$(lq "SHOW shared_preload_libraries")"

echo "== a processor on the multi-host string, a writer that records what was acknowledged"
"$runner_bin" "$multi application_name=patroni_processor" public.docs billing billing-1 "$scratch/delivered" \
    --all-versions --lease-ms 6000 --renew-ms 1000 --acquire-ms 500 >"$scratch/runner.log" 2>&1 &
runner=$!
pids+=("$runner")
live() { [ "$(lq "SELECT count(*) FROM changefeed.processor_status WHERE processor = 'billing' AND live" 2>/dev/null)" = 4 ]; }
wait_until 30 live || true
writer() {
    local i=1
    while [ ! -f "$scratch/stop" ]; do
        # One transaction: a new row, and key 0 set to its id (key 0's versions in order).
        if psql -qX -v ON_ERROR_STOP=1 -d "$multi" \
            -c "BEGIN; INSERT INTO docs VALUES ($i, '$i'); UPDATE docs SET v = '$i' WHERE id = 0; COMMIT" \
            >/dev/null 2>&1; then
            echo "$i" >>"$scratch/acked"
        fi
        i=$((i + 1))
        sleep 0.1
    done
}
writer &
writer_pid=$!
pids+=("$writer_pid")
sleep 3

echo "== switchover to node2"
runuser -u postgres -- patronictl -c "$scratch/node1.yml" switchover --leader node1 --candidate node2 --force \
    >"$scratch/switchover.log" 2>&1 ||
    runuser -u postgres -- patronictl -c "$scratch/node1.yml" switchover --master node1 --candidate node2 --force \
        >>"$scratch/switchover.log" 2>&1 || true
wait_until 60 is_leader 2 || true
check "switchover: node2 leads" 2 "$(leader)"
wait_until 120 streaming 1 || true
check "switchover: node1 streams from it" "replica running" "$(role 1)"
sleep 3

echo "== a commit the failover will abandon, then node2's Patroni and postmaster killed"
# The leader's WAL sender frozen: what it commits from now on never reaches node1.
sender=$(on 2 "SELECT pid FROM pg_stat_replication")
kill -STOP "$sender"
on 2 "SET synchronous_commit = local; INSERT INTO other VALUES (1)"
abandoned=$(on 2 "SELECT changefeed.current_position()")
postmaster=$(head -1 "$scratch/node2/data/postmaster.pid")
kill -KILL $(pgrep -u postgres -f "patroni $scratch/node2.yml") "$postmaster" "$sender"
wait_until 90 is_leader 1 || true
check "failover: node1 leads" 1 "$(leader)"
sleep 3

echo "== node2 comes back and rejoins through pg_rewind"
start_node 2
wait_until 180 streaming 2 || true
check "node2 streams again, synchronously" "replica running" "$(role 2)"
check "node2 was rewound" yes "$(grep -q 'pg_rewind exit code=0' "$scratch/node2.log" && echo yes || echo no)"
sleep 3
touch "$scratch/stop"
wait "$writer_pid" 2>/dev/null || true

echo "== checking"
out=$(psql_try -d "$multi" -c "SELECT count(*) FROM changefeed.read('other', '$abandoned')")
check "the abandoned history's position is refused on the new leader (CF017)" CF017 "${out%% *}"
check "the commit the failover abandoned is gone" 0 "$(lq "SELECT count(*) FROM other")"
lq "SELECT changefeed.wait_for('docs', 'billing', changefeed.current_position(), '120 seconds')" >/dev/null
acked=$(wc -l <"$scratch/acked")
echo "   $acked writes acknowledged; $(wc -l <"$scratch/delivered") deliveries"
check "the writer wrote through all three events" yes "$([ "$acked" -gt 50 ] && echo yes || echo no)"
check "every acknowledged write delivered" "" \
    "$(comm -23 <(sort -u "$scratch/acked") <(awk '$1 != 0 { print $1 }' "$scratch/delivered" | sort -u) | head -5)"
lq "SELECT id FROM docs WHERE id <> 0" | sort -u >"$scratch/final"
check "nothing delivered that the tables do not hold" "" \
    "$(comm -13 "$scratch/final" <(awk '$1 != 0 { print $1 }' "$scratch/delivered" | sort -u) | head -5)"
check "key 0: no version delivered that was not committed" "" \
    "$(comm -13 "$scratch/final" <(awk '$1 == 0 && $2 != 0 { print $2 }' "$scratch/delivered" | sort -u) | head -5)"
check "key 0: its versions first delivered in the order written" yes \
    "$(awk '$1 == 0 && !seen[$2]++ { print $2 }' "$scratch/delivered" | sort -nc 2>/dev/null && echo yes || echo no)"
check "the processor ran on by itself (one process throughout, reconnecting)" "yes yes" \
    "$(kill -0 "$runner" 2>/dev/null && echo yes || echo no) $(grep -q 'event=reconnected' "$scratch/runner.log" && echo yes || echo no)"

stage_summary
