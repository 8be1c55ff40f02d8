#!/usr/bin/env bash
# Torture test of the change feed: concurrent writers, consumers killed with
# SIGKILL and restarted, their connections terminated, a server crash (long
# mode), then a checker that counts lost, phantom, misordered and duplicated
# deliveries and compares the latest-version projection with the table, and
# checks the exactly-once consumer (a transactional handler): every change
# applied exactly once, its projection equal to the tables; and a consumer of
# a role that row-level security lets see the even keys: all of theirs, none
# of the others; and every replace's and delete's image from before against
# the version it replaced (one document in three is large enough that the
# log stores a replace's image from before as a patch).  Beside the writers,
# docs is migrated (ADD, RENAME, DROP COLUMN: versions in the feed, in order)
# and sessions of other TimeZones delete each other's timestamptz-keyed rows
# (every delete's document id must be its create's): shape_and_zones.sh.
#
#   bash test/torture/run.sh [--short | --long] [options]
#
#   --short            one to two minutes, >= 50k changes, 4 kills, no crash (default)
#   --long             >= 1M changes, 24 kills, one server crash mid-run
#   --changes N        stop the writers after about N committed changes
#   --seconds N        ... or after N seconds, whichever comes first
#   --rate N           cap on committed changes per second (writers need not saturate)
#   --kills N          consumer SIGKILLs
#   --crash | --no-crash
#   --broken           replace the all-versions consumers by one that reads the log by
#                      "seq > last seen" (to show that the checker catches it; must FAIL)
#   --no-preload       a cluster without the library preloaded (writers send NOTIFY)
#   --ranges N         ranges of docs (default 16; docs2 keeps 4)
#   --instances N      all-versions consumer processes, instances of one processor (default 3)
#   --port N --dir DIR cluster port and directory (default 55530, a fresh /tmp dir)
#   --build-dir DIR    CMake build directory (default build); --no-build skips building
#   --keep             leave the cluster running for a look afterwards
#
# Prints one summary line; exits 1 on any loss, phantom, misorder, wrong image from before or
# projection mismatch.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)

SCRIPT=run.sh
source test/torture/stage.sh
source test/torture/shape_and_zones.sh
writer_opts=()
mode=short changes= seconds= rate= kills= crash= broken=0 preload=1 ranges=16 instances=3 port=55530 dir= build_dir=build build=1 keep=0
parse_options "$SCRIPT" "${torture_options[@]}" --seconds=seconds --kills=kills --crash=crash:1 --no-crash=crash:0 \
    --broken=broken:1 --no-preload=preload:0 --ranges=ranges --instances=instances -- "$@"
if [ "$mode" = short ]; then
    : "${changes:=52000}" "${seconds:=150}" "${rate:=1000}" "${kills:=4}" "${crash:=0}"
    catchup_timeout=240
else
    : "${changes:=1050000}" "${seconds:=2400}" "${rate:=3000}" "${kills:=24}" "${crash:=1}"
    # Bigger transactions over more keys: a million changes in reasonable time.
    writer_opts=(--max-ops 12 --window 50000)
    catchup_timeout=900
fi
torture_dir torture

torture_programs

echo "== cluster in $dir (port $port)"
# When preloaded, the maintenance worker runs now and then during the run, as in production.
conf=(--conf "synchronous_commit = on")
if [ "$preload" = 1 ]; then conf+=(--conf "changefeed.maintain_interval = 30"); else conf+=(--no-preload); fi
bash test/cluster.sh start "$dir" --port "$port" "${conf[@]}"
eval "$(bash test/cluster.sh env "$dir")"
work=$dir/work
mkdir -p "$work"
psql -qX -v docs_ranges="$ranges" -f test/torture/setup.sql >/dev/null

trap torture_cleanup EXIT

# Keeps one consumer slot running: restarted after every kill, a fresh
# instance name each time (the dead one's leases must expire and be taken over).
supervise() {  # slot-name consumer-mode [broken slot number]
    local slot=$1 cmode=$2 n=0
    while [ ! -f "$work/stop" ] && [ "$n" -lt 500 ]; do
        n=$((n + 1))
        local arg=$slot.$n
        [ "$cmode" = broken ] && arg=$3
        # Each incarnation pages differently: small pages read the log in tick-bounded windows.
        local batches=(10 50 200 1000)
        "$consumer_bin" "$cmode" "$arg" --batch "${batches[$((RANDOM % 4))]}" --max-seconds $((seconds + catchup_timeout + 600)) \
            >>"$work/$slot.log" 2>&1 &
        echo $! >"$work/$slot.pid"
        wait $! || true
        sleep 0.3
    done
}

slots=()
for i in $(seq 1 "$instances"); do
    if [ "$broken" = 1 ]; then
        supervise "broken-$i" broken $((i - 1)) 2>/dev/null & sup_pids+=($!); slots+=("broken-$i")
    else
        supervise "all-$i" all 2>/dev/null & sup_pids+=($!); slots+=("all-$i")
    fi
done
supervise latest latest 2>/dev/null & sup_pids+=($!); slots+=(latest)
supervise exact exact 2>/dev/null & sup_pids+=($!); slots+=(exact)
supervise rls rls 2>/dev/null & sup_pids+=($!); slots+=(rls)
# A processor starts from the position of its first start: the writers wait
# until both processors' leases exist (the broken consumer reads from seq 0).
[ "$broken" = 1 ] || wait_for_leases 8 torture-all torture-latest torture-exact torture-rls

echo "== writers: up to $changes changes or $seconds s, at most $rate changes/s; $kills kills, crash=$crash"
start_ts=$(date +%s)
"$writer_bin" "${writer_opts[@]+"${writer_opts[@]}"}" --writers 8 --seconds "$seconds" --changes "$changes" --rate "$rate" \
    --stats "$work/writer.stats" --progress "$work/writer.progress" >"$work/writer.log" 2>&1 &
writer_pid=$!
migrate_under_load "$writer_pid" & sup_pids+=($!)
zone_writers "$writer_pid" >/dev/null 2>&1 & sup_pids+=($!)

# Faults, spread over the run by the writers' progress (committed changes);
# kills not done by the time the writers stop happen during the catch-up.
progress() { cat "$work/writer.progress" 2>/dev/null || echo 0; }
spacing=$(( changes / (kills + 1) ))
next_kill=$(( spacing / 2 + RANDOM % (spacing + 1) ))
crash_after=$(( changes / 2 - changes / 10 + RANDOM % (changes / 5 + 1) ))
killed=0 terminated=0 crashed=0 loops=0
while [ "$loops" -lt 100000 ]; do
    loops=$((loops + 1))
    writing=0; kill -0 "$writer_pid" 2>/dev/null && writing=1
    [ "$writing" = 0 ] && [ "$killed" -ge "$kills" ] && [ "$crashed" -ge "$crash" ] && break
    now=$(date +%s) done_changes=$(progress)
    if [ "$killed" -lt "$kills" ] && { [ "$done_changes" -ge "$next_kill" ] || [ "$writing" = 0 ]; }; then
        slot=${slots[$((RANDOM % ${#slots[@]}))]}
        if [ -f "$work/$slot.pid" ] && kill -KILL "$(cat "$work/$slot.pid")" 2>/dev/null; then
            killed=$((killed + 1))
            echo "   kill $killed: $slot at +$((now - start_ts))s, $done_changes changes"
        fi
        next_kill=$(( done_changes + spacing / 2 + RANDOM % (spacing + 1) ))
        [ "$writing" = 0 ] && sleep 3  # let the restarted consumer get going
    fi
    if [ "$crashed" -lt "$crash" ] && { [ "$done_changes" -ge "$crash_after" ] || [ "$writing" = 0 ]; }; then
        echo "   server crash (immediate stop, start) at +$((now - start_ts))s, $done_changes changes"
        bash test/cluster.sh restart "$dir" --immediate
        crashed=$((crashed + 1))
    fi
    if [ "$writing" = 1 ] && [ $((RANDOM % 3)) = 0 ]; then
        terminated=$((terminated + $(terminate_consumer_backends)))
    fi
    sleep 1
done
wait "$writer_pid" || { echo "run.sh: writer failed:"; cat "$work/writer.log"; exit 1; }
write_s=$(( $(date +%s) - start_ts ))
echo "   writers: $(cat "$work/writer.stats") in ${write_s}s"

echo "== waiting for the consumers to catch up (at most ${catchup_timeout}s)"
catchup_start=$(date +%s)
last_count=-1 still=0
while :; do
    read -r count missing behind exact_behind < <(psql -qXAt -F ' ' -f test/torture/progress.sql)
    waited=$(( $(date +%s) - catchup_start ))
    [ "$missing" = 0 ] && [ "$behind" = 0 ] && [ "$exact_behind" = 0 ] && break
    # Progress of any consumer (all-versions deliveries, the projection, the
    # exactly-once consumer) keeps the wait going.
    if [ "$count.$behind.$exact_behind" = "$last_count" ]; then still=$((still + 5)); else still=0; fi
    last_count=$count.$behind.$exact_behind
    # Deliveries stopped growing with changes still missing: they are lost.
    if [ "$waited" -ge "$catchup_timeout" ] || [ "$still" -ge 60 ]; then
        echo "   gave up after ${waited}s: $missing undelivered, projection $behind behind, exactly-once consumer $exact_behind behind"
        break
    fi
    sleep 5
done
catchup_s=$(( $(date +%s) - catchup_start ))

echo "== checking"
for p in "${sup_pids[@]: -2}"; do wait "$p" 2>/dev/null || true; done  # the last migration step and zone session
result=$(psql -qXAt -v ON_ERROR_STOP=1 -c "SET client_min_messages = warning" -f test/torture/check.sql | tail -1)
shape=$(psql -qXAt -v ON_ERROR_STOP=1 -v steps="$(wc -l <"$work/migrations")" -f test/torture/check_shape.sql | tail -1)
result="$result $shape"
ws=$(cat "$work/writer.stats")
get() { sed -n "s/.*\b$1=\([0-9]*\).*/\1/p" <<<"$2"; }
status=PASS
for k in lost phantom misordered stream_gaps wrong_range projection_mismatch wrong_previous \
         exact_applied_twice exact_unapplied exact_projection_mismatch rls_lost rls_leaked \
         schema_versions_missing schema_rows_missing schema_misordered zone_id_mismatch zone_orphans; do
    v=$(sed -n "s/.*\(^\| \)$k=\([0-9-]*\).*/\2/p" <<<"$result")
    [ -n "$v" ] && [ "$v" = 0 ] || status=FAIL
done
# The run must have made patches for wrong_previous to have checked them.
v=$(sed -n "s/.*\(^\| \)previous_patches=\([0-9]*\).*/\2/p" <<<"$result")
[ -n "$v" ] && [ "$v" -gt 0 ] || status=FAIL
consumer_kind=processor+exactly-once; [ "$broken" = 1 ] && consumer_kind=broken-seq+exactly-once
echo "torture mode=$mode consumer=$consumer_kind changes=$(get changes "$ws") txns=$(get txns "$ws")" \
     "rollbacks=$(get rollbacks "$ws") savepoint_rollbacks=$(get savepoint_rollbacks "$ws")" \
     "held=$(get held "$ws") truncates=$(get truncates "$ws") $result kills=$killed terminated=$terminated" \
     "crashes=$crashed write_s=$write_s catchup_s=$catchup_s result=$status"
if [ "$status" != PASS ]; then
    for t in bad_lost bad_phantom bad_misordered bad_stream bad_previous; do
        echo "-- torture.$t (first rows)"
        psql -qX -c "SELECT * FROM torture.$t LIMIT 10" || true
    done
    echo "details: tables torture.bad_lost, bad_phantom, bad_misordered, bad_stream, bad_previous (run with --keep);" \
         "consumer logs in $work"
    exit 1
fi
