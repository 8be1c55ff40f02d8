#!/usr/bin/env bash
# PgBouncer 1.18 in front of changefeed, in session and in transaction mode.
#   One pgbouncer (run as postgres, on a loopback port) serves two pools of
#   the same database: `sess` (pool_mode=session) and `txn`
#   (pool_mode=transaction, 20 server connections).  The torture consumers run
#   through it in all three handler shapes -- a Handler ("all", at least once,
#   every delivery recorded), a TransactionalHandler ("exact", exactly once) and
#   a Projector ("project") -- one instance of each per pool, the txn ones with
#   changefeed_pooler=transaction in their connection string.  The torture
#   writer loads the tables directly while the script RECONNECTs both pools,
#   PAUSEs and RESUMEs the txn pool, and KILLs the sess pool's connections.
#   Then `changefeed tail`, a subscription and the bridge (into a NATS
#   JetStream the script starts) read through the txn pool, and 100 processors
#   (10 processes of 10) run through it and directly, and the server
#   connections they hold are counted.
# Checked: every committed change delivered, none invented, none out of order
# (test/torture/check.sql); the exactly-once consumer applied each change once
# and its projection equals the tables; the projector missed none; each pool's
# consumers delivered; no processor's registration was taken by another (their
# names are held by time through the txn pool, by session through sess); the
# CLI, the subscription and the bridge read through the txn pool; 100
# processors deliver through at most the txn pool's 20 server connections.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/pgbouncer.sh [--port N] [--build-dir DIR] [--no-build] [--keep]
# The cluster takes port N, pgbouncer N + 1, nats-server N + 2.  Installs pgbouncer if missing.
# Prints the connection counts, then `N passed, M failed`; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

SCRIPT=pgbouncer.sh
source test/support/checks.sh
source test/torture/stage.sh
port=55476 build_dir=build build=1 keep=0
parse_options "$SCRIPT" --port=port --build-dir=build_dir --no-build=build:0 --keep=keep:1 -- "$@"
bport=$((port + 1))
debian_packages pgbouncer
mode=short
torture_programs
cmake_targets "$build_dir" cf_processor_runner cf_subscription_runner cf_bridge_runner changefeed_cli
runner_bin=$(built_program "$SCRIPT" "$build_dir" cf_processor_runner)
subscription_bin=$(built_program "$SCRIPT" "$build_dir" cf_subscription_runner)
bridge_bin=$(built_program "$SCRIPT" "$build_dir" cf_bridge_runner)
cli_bin=$(built_program "$SCRIPT" "$build_dir" changefeed)

stage_scratch pgbouncer
dir=$scratch/db
work=$scratch/work
mkdir -p "$work"
chown postgres "$scratch" "$work"
# stop_pids FILE...: stops the processes whose pids the files hold, and waits for them.
stop_pids() {
    local p
    for p in $(cat "$@" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    for p in $(cat "$@" 2>/dev/null); do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
}
finish() {
    stop_pids "$work"/*.pid "$work"/*.pids
    [ -f "$scratch/pgbouncer.pid" ] && kill "$(cat "$scratch/pgbouncer.pid")" 2>/dev/null || true
    stage_cleanup "$dir"
}
trap finish EXIT

bash test/cluster.sh start "$dir" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 30" \
    --conf "max_connections = 400"
eval "$(bash test/cluster.sh env "$dir")"
psql -qX -v docs_ranges=16 -f test/torture/setup.sql >/dev/null
psql -qX -f test/consumer_faults/setup.sql >/dev/null

cat >"$scratch/pgbouncer.ini" <<EOF
[databases]
sess = host=$dir port=$port dbname=postgres pool_mode=session
txn = host=$dir port=$port dbname=postgres pool_mode=transaction pool_size=20
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $scratch/users.txt
admin_users = postgres
max_client_conn = 2000
default_pool_size = 200
logfile = $scratch/pgbouncer.log
pidfile = $scratch/pgbouncer.pid
EOF
echo '"postgres" ""' >"$scratch/users.txt"
chown postgres "$scratch/pgbouncer.ini" "$scratch/users.txt"
runuser -u postgres -- pgbouncer -d "$scratch/pgbouncer.ini"
admin() { psql -qXAt -h 127.0.0.1 -p "$bport" -U postgres -d pgbouncer -c "$1" >/dev/null; }
for _ in $(seq 50); do admin "SHOW VERSION" 2>/dev/null && break; sleep 0.1; done
check "pgbouncer 1.18 answers" "PgBouncer 1.18" \
    "$(psql -qXAt -h 127.0.0.1 -p "$bport" -U postgres -d pgbouncer -c "SHOW VERSION" | grep -o 'PgBouncer 1\.18')"

# consumer KIND POOL: one torture consumer through pool POOL, in the background.
consumer() {
    local pooler=session
    [ "$2" = txn ] && pooler=transaction
    PGHOST=127.0.0.1 PGPORT=$bport PGDATABASE=$2 PGUSER=postgres \
        "$consumer_bin" "$1" "$1-$2" --batch 50 --pooler "$pooler" --max-seconds 600 >>"$work/$1-$2.log" 2>&1 &
    echo $! >"$work/$1-$2.pid"
}
echo "== the consumers, one of each shape through each pool"
for kind in all exact project; do
    for pool in sess txn; do consumer "$kind" "$pool"; done
done
wait_for_leases 6 torture-all torture-exact torture-project

echo "== the writer, directly; the pooler reconnected, paused and killed meanwhile"
"$writer_bin" --writers 4 --seconds 40 --changes 8000 --rate 400 --stats "$work/writer.stats" \
    --progress "$work/writer.progress" >"$work/writer.log" 2>&1 &
writer_pid=$!
faults=0
for step in 1 2 3 4 5 6; do
    sleep 3
    kill -0 "$writer_pid" 2>/dev/null || break
    case $step in
        1 | 4) admin "RECONNECT" ;;                                            # new server connections, as released
        2 | 5) admin "PAUSE txn"; sleep 1.5; admin "RESUME txn" ;;            # transactions wait, none fails
        3 | 6) admin "KILL sess"; sleep 0.5; admin "RESUME sess" ;;           # session clients lose their connections
    esac
    faults=$((faults + 1))
done
wait "$writer_pid" || { echo "$SCRIPT: writer failed:"; cat "$work/writer.log"; exit 1; }
echo "   writer: $(cat "$work/writer.stats"); $faults pooler faults"

echo "== waiting for the consumers to catch up"
progress_sql="SELECT (SELECT count(*) FROM torture.truth t WHERE t.op <> 'd' AND NOT EXISTS
                        (SELECT 1 FROM torture.deliveries d WHERE d.tbl = t.tbl AND d.vid = t.vid))
                   + ((SELECT count(*) FROM torture.truth) + (SELECT count(*) FROM torture.truth_clear)
                      - (SELECT count(*) FROM torture.exact_applied))
                   + ((SELECT count(*) FROM torture.truth) + (SELECT count(*) FROM torture.truth_clear)
                      - (SELECT count(DISTINCT event_id) FROM torture.project_calls))"
for _ in $(seq 120); do
    [ "$(psql -qXAt -c "$progress_sql")" = 0 ] && break
    sleep 1
done
result=$(psql -qXAt -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -f test/torture/check.sql | tail -1)
faults_result=$(psql -qXAt -v ON_ERROR_STOP=1 -f test/consumer_faults/check.sql | tail -1)
echo "   $result"
echo "   $faults_result"
count_of() { sed -n "s/.*\(^\| \)$1=\([0-9-]*\).*/\2/p" <<<"$2"; }
for k in lost phantom misordered stream_gaps exact_applied_twice exact_unapplied exact_projection_mismatch; do
    check "$k = 0" 0 "$(count_of "$k" "$result")"
done
check "project_missing = 0" 0 "$(count_of project_missing "$faults_result")"
check "the writer committed changes" yes "$([ "$(psql -qXAt -c "SELECT count(*) FROM torture.truth")" -gt 1000 ] \
    && echo yes || echo no)"
check "the Handler instances of both pools delivered" "all-sess all-txn" \
    "$(psql -qXAt -c "SELECT string_agg(DISTINCT split_part(inst, '#', 1), ' ') FROM torture.deliveries")"
# What the consumers were told besides lost connections, leases another instance
# took over meanwhile (CF010), and failures of their handlers, whose own connections
# go through the pooler too (its KILL breaks them; the batch comes again, and the
# checks above count what arrived).
check "no consumer was told of an error but lost connections, leases and handler failures" "" \
    "$(cat "$work"/*-*.log | grep 'on_error:' | grep -v -i -e 'connection' -e 'SQLSTATE CF010' -e 'handler failed' |
        sort | uniq -c | head -5)"
check "every consumer still runs" 6 "$(for f in "$work"/*-*.pid; do kill -0 "$(cat "$f")" 2>/dev/null && echo; done | wc -l)"
check "the txn instances hold their names by time, the sess ones by session" "sess:session txn:time" \
    "$(psql -qXAt -c "SELECT string_agg(DISTINCT split_part(instance, '-', 2) || ':' || CASE WHEN held_until IS NULL THEN 'session' ELSE 'time' END, ' '
                        ORDER BY split_part(instance, '-', 2) || ':' || CASE WHEN held_until IS NULL THEN 'session' ELSE 'time' END)
                        FROM changefeed.instance")"
stop_pids "$work"/*-*.pid

echo "== changefeed tail through the txn pool"
psql -qXc "CREATE TABLE many (id int PRIMARY KEY, v text); SELECT changefeed.enable('many', ranges => 4)" >/dev/null
before=$(psql -qXAt -c "SELECT changefeed.current_position()")
psql -qXAt -c "INSERT INTO many SELECT i, 'tail' FROM generate_series(1, 3) i" >/dev/null
tail_out=$("$cli_bin" tail public.many --from "$before" --count 3 --timeout 20 --poll 0.2 \
    -d "host=127.0.0.1 port=$bport dbname=txn user=postgres changefeed_pooler=transaction" 2>"$work/tail.err" | wc -l)
check "tail read the three changes through the txn pool" 3 "$tail_out"

txn="host=127.0.0.1 port=$bport user=postgres dbname=txn changefeed_pooler=transaction"
echo "== a subscription through the txn pool"
"$subscription_bin" "$txn" public.many 5 30 --poll-ms 200 >"$work/subscription.out" 2>"$work/subscription.err" &
subscriber=$!
for _ in $(seq 100); do grep -q ready "$work/subscription.err" && break; sleep 0.1; done
psql -qXAt -c "INSERT INTO many SELECT i, 'subscription' FROM generate_series(11, 15) i" >/dev/null
rc=0; wait "$subscriber" || rc=$?
check "the subscription received the five changes" "0 5" "$rc $(sort -u "$work/subscription.out" | wc -l)"

echo "== the bridge through the txn pool, into NATS JetStream"
nats-server -a 127.0.0.1 -p $((port + 2)) -js -sd "$scratch/nats" >"$work/nats.log" 2>&1 &
echo $! >"$work/nats.pid"
"$bridge_bin" "$txn" many bridge bridge-1 "nats://127.0.0.1:$((port + 2))" cf CF "$work/bridge.stats" \
    >"$work/bridge.log" 2>&1 &
echo $! >"$work/bridge.pid"
for _ in $(seq 100); do
    [ "$(psql -qXAt -c "SELECT count(*) FROM changefeed.processor_status WHERE processor = 'bridge' AND live")" = 4 ] &&
        break
    sleep 0.2
done
psql -qXAt -c "INSERT INTO many SELECT i, 'bridge' FROM generate_series(21, 40) i" >/dev/null
acked() { awk '$1 == "ok" { a += $2; d += $3 } END { print a + 0, d + 0 }' "$work/bridge.stats" 2>/dev/null; }
for _ in $(seq 150); do [ "$(acked | cut -d' ' -f1)" -ge 20 ] && break; sleep 0.2; done
check "the bridge published the twenty changes, JetStream acknowledged each once" "20 0" "$(acked)"
stop_pids "$work/bridge.pid" "$work/nats.pid"

echo "== without changefeed_pooler through the txn pool: the errors say what to add"
for i in 1 2; do
    "$runner_bin" "host=127.0.0.1 port=$bport user=postgres dbname=txn" public.many "bare-$i" "bare-$i" \
        "$work/bare.out" --processors 2 >>"$work/bare.log" 2>&1 &
    echo $! >>"$work/bare.pids"
done
for _ in $(seq 100); do grep -q 'changefeed_pooler=transaction' "$work/bare.log" && break; sleep 0.1; done
stop_pids "$work/bare.pids"
check "a prepared statement lost between sessions is reported with the keyword to add" yes \
    "$(grep -q 'SQLSTATE \(26000\|42P05\)). Hint: behind a pooler in transaction mode.*changefeed_pooler=transaction' \
        "$work/bare.log" && echo yes || echo no)"

echo "== server connections of 100 processors (10 processes of 10)"
# The pools' server connections of the steps above closed first.
admin "KILL sess"; admin "RESUME sess"; admin "KILL txn"; admin "RESUME txn"
# backends APP: the client backends of one fleet, by the application_name its
# connection strings set (PgBouncer passes it on to its server connections):
# no other session (this script's, one of an earlier step still closing) counts.
backends() { psql -qXAt -c "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'
                             AND datname = 'postgres' AND application_name = '$1'"; }
# fleet NAME CONNINFO [RUNNER OPTIONS]: 100 processors NAME-1..NAME-100 in 10 processes; the most
# client backends seen over 5 s once every processor holds its leases.
fleet() {
    local name=$1 conninfo=$2 i most=0 n
    shift 2
    # A table of its own: a role may claim at most 100 processor names per table.
    psql -qXc "CREATE TABLE fleet_$name (id int PRIMARY KEY, v text);
               SELECT changefeed.enable('fleet_$name', ranges => 4)" >/dev/null
    for i in $(seq 10); do
        "$runner_bin" "$conninfo application_name=fleet-$name" "public.fleet_$name" "$name-p$i" "$name-p$i" \
            "$work/$name.out" --processors 10 "$@" \
            >>"$work/$name.log" 2>&1 &
        echo $! >>"$work/$name.pids"
    done
    for _ in $(seq 200); do
        n=$(psql -qXAt -c "SELECT count(DISTINCT processor) FROM changefeed.leases
                            WHERE table_name = 'fleet_$name'::regclass AND owner IS NOT NULL")
        [ "$n" = 100 ] && break
        sleep 0.2
    done
    for _ in $(seq 10); do
        n=$(backends "fleet-$name")
        [ "$n" -gt "$most" ] && most=$n
        sleep 0.5
    done
    echo "$most"
}
# fleet_end NAME: writes one row, waits until every processor of NAME got it, stops them; prints how many did.
fleet_end() {
    local got=0
    psql -qXAt -c "INSERT INTO fleet_$1 VALUES (1, 'x')" >/dev/null
    for _ in $(seq 100); do
        got=$(wc -l <"$work/$1.out")
        [ "$got" -ge 100 ] && break
        sleep 0.2
    done
    stop_pids "$work/$1.pids"
    echo "$got"
}
direct=$(fleet direct "host=$dir port=$port user=postgres dbname=postgres")
direct_got=$(fleet_end direct)
pooled=$(fleet pooled "host=127.0.0.1 port=$bport user=postgres dbname=txn changefeed_pooler=transaction" \
    --no-long-poll --poll-ms 1000)
pooled_got=$(fleet_end pooled)
echo "   server connections: $direct directly, $pooled through the txn pool (20 at most; no long poll, 1 s polls)"
check "100 processors delivered directly" 100 "$direct_got"
check "100 processors delivered through the txn pool" 100 "$pooled_got"
check "through the txn pool they hold at most its 20 server connections" yes \
    "$([ "$pooled" -le 20 ] && echo yes || echo no)"

status=PASS
stage_summary
