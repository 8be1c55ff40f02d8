#!/usr/bin/env bash
# Capture on a Citus cluster (a coordinator and two workers, Citus built from
# ../shared/vendor and cached: test/citus_cluster.sh): a hash-distributed
# table enabled on the coordinator is captured on every shard placement, in
# its worker's log, while writers go on through the coordinator and the
# shards are moved (blocking and by logical replication), split, moved back
# to a worker that held them before, a worker restarts (immediate), and a
# third worker is added and takes a shard.
#   1. what cannot be captured once per write is refused (CF027): a
#      reference table, a Citus local table, a shard placement, a
#      distributed table enabled on a worker;
#   2. every placement Citus made, the new ones of moves and splits too, is
#      captured (verify() on each worker: intact);
#   3. the checker (test/citus/check.py): each key's committed changes, read
#      placement after placement in the order they were made, each to its end,
#      are all there, once each, in order, with their images from before;
#   4. the same check of what a processor on the coordinator was handed
#      (test/citus/processor.cpp, two instances, one killed and restarted,
#      exactly once) through the table's feed there, which
#      changefeed.collect() fills from the workers while all of this goes on;
#      the checker reading the newest placements first (a handoff that does
#      not read the old placement to its end) fails: the check can fail;
#   5. TRUNCATE of the distributed table is logged as cleared by every shard,
#      a write to a placement in replica mode (not Citus's own move) is
#      refused, and disable() on the coordinator forgets every placement's
#      capture.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/citus.sh [--port N] [--build-dir DIR] [--no-build] [--keep]   (ports N .. N+3)
# Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PGOPTIONS='-c client_min_messages=warning'

source test/support/checks.sh
port=55560 build_dir=build build=1 keep=0
parse_options citus.sh --port=port --build-dir=build_dir --no-build=build:0 --keep=keep:1 -- "$@"
[ "$build" = 0 ] || cmake_targets "$build_dir" citus_processor
processor_bin=$(built_program citus.sh "$build_dir" citus_processor)
stage_scratch citus
cluster=$scratch/cluster
python=${CHANGEFEED_PYTHON:-/usr/bin/python3}
writers= collector= processors=()
cleanup() {
    touch "$scratch/stop" "$scratch/stop-collector"
    [ -z "$writers" ] || wait "$writers" 2>/dev/null || true
    [ -z "$collector" ] || wait "$collector" 2>/dev/null || true
    for p in "${processors[@]+"${processors[@]}"}"; do kill -9 "$p" 2>/dev/null || true; done
    bash test/citus_cluster.sh stop "$cluster" --immediate >/dev/null 2>&1 || true
    if [ "$keep" = 1 ]; then echo "kept $scratch"; else rm -rf "$scratch"; fi
}
trap cleanup EXIT

debian_packages python3-psycopg
bash test/citus_cluster.sh start "$cluster" --port-base "$port"
coordinator=$cluster/coordinator worker1=$cluster/worker1 worker2=$cluster/worker2
conninfo() { echo "host=$1 port=$(cat "$1/port") user=postgres dbname=postgres"; }
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$1" -p "$(cat "$1/port")" -U postgres -d postgres -c "$2"; }
try() { psql_try -h "$1" -p "$(cat "$1/port")" -U postgres -d postgres -c "$2"; }
# the live placements of docs a worker captures
placements() {
    q "$1" "SELECT count(*) FROM changefeed.collection c JOIN changefeed.shard_placement p ON p.collection_id = c.id
             WHERE p.table_name = 'public.docs'"
}
node_of() { q "$coordinator" "SELECT nodeid FROM pg_dist_node WHERE nodename = '$1'"; }
# a shard of docs on the worker in $1
shard_on() {
    q "$coordinator" "SELECT shardid FROM citus_shards WHERE table_name = 'docs'::regclass AND nodename = '$1'
                       ORDER BY shardid LIMIT 1"
}

echo "== what cannot be captured once per write is refused"
q "$coordinator" "SET citus.shard_count = 8;
                  CREATE TABLE docs (id bigint PRIMARY KEY, v bigint NOT NULL, pad text);
                  SELECT create_distributed_table('docs', 'id');
                  CREATE TABLE countries (code text PRIMARY KEY);
                  SELECT create_reference_table('countries');
                  CREATE TABLE notes (id int PRIMARY KEY);
                  SELECT citus_add_local_table_to_metadata('notes');" >/dev/null
check "a reference table is refused" "CF027" "$(try "$coordinator" "SELECT changefeed.enable('countries')" | cut -d' ' -f1)"
check "a Citus local table is refused" "CF027" "$(try "$coordinator" "SELECT changefeed.enable('notes')" | cut -d' ' -f1)"
shard=$(shard_on "$worker1")
check "a shard placement is refused" "CF027" "$(try "$worker1" "SELECT changefeed.enable('docs_$shard')" | cut -d' ' -f1)"
check "a distributed table is refused on a worker" "CF027" "$(try "$worker1" "SELECT changefeed.enable('docs')" | cut -d' ' -f1)"
check "the distributed table is enabled on the coordinator" "OK 1" "$(try "$coordinator" "SELECT changefeed.enable('docs')")"
q "$coordinator" "CREATE SCHEMA citus_check;
                  CREATE TABLE citus_check.deliveries (did bigserial PRIMARY KEY, inst text, range_id int, seq bigint,
                                                       op \"char\", id bigint, v bigint, prev_v bigint)"
check "a table distributed and enabled in one transaction is captured on every placement" "OK 4" \
    "$(try "$coordinator" "BEGIN; SET LOCAL citus.shard_count = 4; CREATE TABLE events (id bigint PRIMARY KEY, v int);
                           SELECT create_distributed_table('events', 'id'); SELECT changefeed.enable('events'); COMMIT;
                           SELECT count(*) FROM citus_shards s WHERE s.table_name = 'events'::regclass" | tail -1 | sed 's/^/OK /')"
check "... and collect() brings its changes to the coordinator" "100" \
    "$(q "$coordinator" "INSERT INTO events SELECT g, 1 FROM generate_series(1, 100) g" >/dev/null
       q "$coordinator" "SELECT changefeed.collect('events')")"
check "a tenant column is captured on the placements and read by tenant on the coordinator" "30 10" \
    "$(q "$coordinator" "CREATE TABLE orders (id bigint PRIMARY KEY, tenant text NOT NULL, total int);
                         SELECT create_distributed_table('orders', 'id');
                         SELECT changefeed.enable('orders', tenant_column => 'tenant');
                         INSERT INTO orders SELECT g, 't' || g % 3, g FROM generate_series(1, 30) g;" >/dev/null
       q "$coordinator" "SELECT changefeed.collect('orders')") $(q "$coordinator" "
         SELECT count(*) FROM changefeed.read('orders', changefeed.position_at('orders', now() - interval '1 hour'),
                                              tenant => 't1')")"
# A role of the extension's, owning a table of its own on a worker named like
# a placement of docs, and calling itself a Citus connection: its trigger
# would put its writes in docs' feed.
q "$coordinator" "CREATE ROLE intruder; GRANT changefeed_reader TO intruder; GRANT CREATE ON SCHEMA public TO intruder"
check "another role's table named like a placement cannot add changes to the table's feed" "CF013" \
    "$(try "$worker1" "SET application_name = 'citus_internal gpid=1'; SET ROLE intruder;
                       CREATE TABLE docs_999999 (id bigint PRIMARY KEY, v bigint, pad text);
                       CREATE TRIGGER changefeed_capture_999999 AFTER INSERT OR UPDATE OR DELETE ON docs_999999
                           FOR EACH ROW EXECUTE FUNCTION changefeed.capture_row('1', '16', 't', 'f', '1', 'id', '1', 'id', '')" |
       cut -d' ' -f1)"
check "every shard placement is a collection of its worker" "8" \
    "$(( $(placements "$worker1") + $(placements "$worker2") ))"

echo "== writers through the coordinator; moves, a split, a worker restart meanwhile"
# The coordinator's feed of docs, filled by collect() (errors while a worker
# restarts are retried), and two instances of a processor reading it.
(
    while [ ! -f "$scratch/stop-collector" ]; do
        q "$coordinator" "SELECT changefeed.collect('docs')" >/dev/null 2>>"$scratch/collector.log" || sleep 0.5
        sleep 0.2
    done
) &
collector=$!
start_processor() {
    PGHOST=$coordinator PGPORT=$port PGUSER=postgres PGDATABASE=postgres \
        "$processor_bin" "$1" >>"$scratch/processor-$1.log" 2>&1 &
    processors+=($!)
    eval "processor_$1=$!"
}
start_processor a
start_processor b
"$python" test/citus/write.py "$(conninfo "$coordinator")" --clients 4 --keys 2000 \
    --stop-file "$scratch/stop" --stats "$scratch/writers" &
writers=$!
sleep 4
shard=$(shard_on "$worker1")
q "$coordinator" "SELECT citus_move_shard_placement($shard, '$worker1', $((port + 1)), '$worker2', $((port + 2)),
                                                    shard_transfer_mode => 'block_writes')" >/dev/null
echo "moved shard $shard to worker2, writes blocked meanwhile"
sleep 3
moved_back=$(shard_on "$worker1")
q "$coordinator" "SELECT citus_move_shard_placement($moved_back, '$worker1', $((port + 1)), '$worker2', $((port + 2)),
                                                    shard_transfer_mode => 'force_logical')" >/dev/null
echo "moved shard $moved_back to worker2 by logical replication"
sleep 3
read -r split mid < <(q "$coordinator" "SELECT s.shardid, (s.shardminvalue::bigint + s.shardmaxvalue::bigint) / 2
                                          FROM pg_dist_shard s JOIN citus_shards c USING (shardid)
                                         WHERE c.table_name = 'docs'::regclass AND c.nodename = '$worker2'
                                         ORDER BY s.shardid LIMIT 1" | tr '|' ' ')
q "$coordinator" "SELECT citus_split_shard_by_split_points($split, ARRAY['$mid'],
                      ARRAY[$(node_of "$worker1"), $(node_of "$worker2")], shard_transfer_mode => 'block_writes')" >/dev/null
echo "split shard $split at $mid across both workers"
{ kill -9 "$processor_a" && wait "$processor_a"; } 2>/dev/null || true
start_processor a
echo "killed processor instance a (SIGKILL), started it again"
sleep 3
bash test/cluster.sh restart "$worker1" --immediate
echo "restarted worker1 (immediate)"
sleep 3
worker3=$cluster/$(bash test/citus_cluster.sh add "$cluster" --port $((port + 3)))
q "$coordinator" "SELECT replicate_reference_tables()" >/dev/null
shard=$(shard_on "$worker2")
q "$coordinator" "SELECT citus_move_shard_placement($shard, '$worker2', $((port + 2)), '$worker3', $((port + 3)),
                                                    shard_transfer_mode => 'force_logical')" >/dev/null
echo "added worker3, moved shard $shard there"
sleep 3
# Back to worker1, where it was before: a new table there, a new collection.
q "$coordinator" "CALL citus_cleanup_orphaned_resources()" >/dev/null
q "$coordinator" "SELECT citus_move_shard_placement($moved_back, '$worker2', $((port + 2)), '$worker1', $((port + 1)),
                                                    shard_transfer_mode => 'force_logical')" >/dev/null
echo "moved shard $moved_back back to worker1"
sleep 3
touch "$scratch/stop"
wait "$writers"
writers=
echo "writers: $(cat "$scratch/writers")"
# Two-phase commits a restart left prepared are finished before the check,
# and the placements moves and splits left behind are dropped.
q "$coordinator" "SELECT recover_prepared_transactions()" >/dev/null
q "$coordinator" "CALL citus_cleanup_orphaned_resources()" >/dev/null
# collect() until every ended placement is read to its end and nothing is
# left, then until the processor has been handed all of it.
touch "$scratch/stop-collector"
wait "$collector"
collector=
docs_changes="SELECT count(*) FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id
               WHERE c.relid = 'docs'::regclass AND l.op IN ('c', 'r', 'd')"
for i in $(seq 600); do
    n=$(q "$coordinator" "SELECT changefeed.collect('docs')" 2>/dev/null || echo -1)
    left=$(q "$coordinator" "SELECT count(*) FROM changefeed.collected_placement WHERE dropped AND NOT done")
    [ "$n" = 0 ] && [ "$left" = 0 ] && break
    sleep 0.2
done
for i in $(seq 600); do
    [ "$(q "$coordinator" "$docs_changes")" = \
      "$(q "$coordinator" "SELECT count(*) FROM citus_check.deliveries WHERE op IN ('c', 'r', 'd')")" ] && break
    sleep 0.2
done
for p in "${processors[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
processors=()

echo "== every change captured once, in order, placement after placement"
# verify() of every collection of a worker: intact ones / all
intact() { q "$1" "SELECT count(*) FILTER (WHERE intact) || '/' || count(*) FROM changefeed.verify()"; }
for w in "$worker1" "$worker2" "$worker3"; do
    n=$(q "$w" "SELECT count(*) FROM changefeed.collection")
    check "$(basename "$w"): every placement's capture intact (verify())" "$n/$n" "$(intact "$w")"
done
check "all placements of docs are collections of their workers" \
    "$(q "$coordinator" "SELECT count(*) FROM citus_shards WHERE table_name = 'docs'::regclass")" \
    "$(( $(placements "$worker1") + $(placements "$worker2") + $(placements "$worker3") ))"
workers=("$(conninfo "$coordinator")" "$(conninfo "$worker1")" "$(conninfo "$worker2")" "$(conninfo "$worker3")")
if out=$("$python" test/citus/check.py "${workers[@]}"); then
    pass "$out"
else
    fail "the changes of every placement, read in order" "$out"
fi
if out=$("$python" test/citus/check.py "$(conninfo "$coordinator")" --deliveries); then
    pass "$out"
else
    fail "the processor on the coordinator was handed every change once, in order" "$out"
fi
if out=$("$python" test/citus/check.py "${workers[@]}" --broken); then
    fail "a handoff that reads the new placement first is caught" "$out"
else
    pass "a handoff that reads the new placement first is caught: ${out##*: lost}"
fi

echo "== TRUNCATE and disable() of the distributed table"
shards=$(q "$coordinator" "SELECT count(*) FROM citus_shards WHERE table_name = 'docs'::regclass")
q "$coordinator" "TRUNCATE docs"
cleared() {
    q "$1" "SELECT count(DISTINCT l.collection_id) FROM changefeed.log l
              JOIN changefeed.collection c ON c.id = l.collection_id AND c.citus = 'shard' WHERE l.op = 't'"
}
check "TRUNCATE is logged as cleared by every shard" "$shards" \
    "$(( $(cleared "$worker1") + $(cleared "$worker2") + $(cleared "$worker3") ))"
s=$(shard_on "$worker1")
check "a write to a placement in replica mode is refused, not let through" "CF014" \
    "$(try "$worker1" "SET session_replication_role = replica; INSERT INTO docs_$s VALUES (-1, 1)" | cut -d' ' -f1)"
q "$coordinator" "SELECT changefeed.disable('docs')" >/dev/null
check "disable() forgets every placement's capture" "0 0 0" \
    "$(placements "$worker1") $(placements "$worker2") $(placements "$worker3")"
check "a worker's own DDL cannot drop a placement's capture trigger" "CF013" \
    "$(q "$coordinator" "SELECT changefeed.enable('docs')" >/dev/null
       s=$(shard_on "$worker1")
       try "$worker1" "DROP TRIGGER changefeed_capture_$s ON docs_$s" | cut -d' ' -f1)"

stage_summary
