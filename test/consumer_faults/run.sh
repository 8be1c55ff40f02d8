#!/usr/bin/env bash
# Consumer fault stage: both consumer shapes that write a projection, run as a
# service would be -- three TransactionalHandler processes (torture-exact) and
# three Projector processes (torture-project), each an instance of its one
# processor name -- under a writer load, while the script SIGKILLs and restarts
# them, freezes them with SIGSTOP past their lease, and terminates their
# backends.  Then it counts:
#   transactional: changes applied twice, changes missing, projection != tables,
#                  and a session that writes, waits with changefeed.wait_for() and
#                  reads its write from that projection, over and over: writes
#                  missing after the wait returned (read-your-writes)
#   projector:     changes missing, duplicate projector calls, and of those the
#                  ones a process death explains (its process was SIGKILLed
#                  between the two calls), the ones a freeze past the lease
#                  explains, and the ones nothing explains (a re-application
#                  after a connection loss, say)
#
#   bash test/consumer_faults/run.sh [--short | --long] [options]
#
#   --short            about 17,000 changes, a kill every ~4 s, a freeze every ~9 s (default)
#   --long             about 150,000 changes, same fault rates
#   --changes N        stop the writers after about N committed changes
#   --rate N           cap on committed changes per second
#   --port N --dir DIR cluster port and directory (default 55478, a fresh /tmp dir)
#   --build-dir DIR    CMake build directory (default build); --no-build skips building
#   --keep             leave the cluster running for a look afterwards
#
# Ends with one line of counts; exits 1 on any missing change, on a change the
# transactional consumer applied twice or a projection mismatch, and on a
# projector duplicate that no process death or freeze explains.
set -euo pipefail
cd "$(dirname "$0")/../.."

SCRIPT=consumer_faults
source test/torture/stage.sh
mode=short changes= rate= port=55478 dir= build_dir=build build=1 keep=0
parse_options "$SCRIPT" "${torture_options[@]}" -- "$@"
if [ "$mode" = short ]; then
    : "${changes:=17000}" "${rate:=400}"
else
    : "${changes:=150000}" "${rate:=800}"
fi
seconds=$(( changes / rate * 2 + 30 ))
catchup_timeout=150
freeze_s=5  # the consumers' lease_duration is 3 s: a freeze of 5 s loses the leases
torture_dir consumer-faults

torture_programs

echo "== cluster in $dir (port $port)"
bash test/cluster.sh start "$dir" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 30"
eval "$(bash test/cluster.sh env "$dir")"
work=$dir/work
mkdir -p "$work"
psql -qX -v docs_ranges=16 -f test/torture/setup.sql >/dev/null
psql -qX -f test/consumer_faults/setup.sql >/dev/null

trap torture_cleanup EXIT

# Keeps one consumer slot running: restarted after every kill under a fresh
# instance name (the dead one's leases expire and are taken over).
supervise() {  # slot consumer-mode
    local slot=$1 cmode=$2 n=0
    local batches=(10 50 200)
    while [ ! -f "$work/stop" ] && [ "$n" -lt 500 ]; do
        n=$((n + 1))
        "$consumer_bin" "$cmode" "$slot.$n" --batch "${batches[$((RANDOM % 3))]}" \
            --max-seconds $((seconds + catchup_timeout + 300)) >>"$work/$slot.log" 2>&1 &
        echo $! >"$work/$slot.pid"
        wait $! || true
        sleep 0.3
    done
}
slots=()
for i in 1 2 3; do
    supervise "exact-$i" exact 2>/dev/null & sup_pids+=($!); slots+=("exact-$i")
    supervise "project-$i" project 2>/dev/null & sup_pids+=($!); slots+=("project-$i")
done
wait_for_leases 4 torture-exact torture-project

# A fault is recorded after the signal took effect, in the server's clock
# (as the projector calls are): a frozen or killed process calls nothing later.
record() {  # pid slot kind
    sleep 0.05
    psql -qXAt -c "INSERT INTO torture.faults (pid, slot, kind) VALUES ($1, '$2', '$3')" >/dev/null
}

echo "== writers: about $changes changes, at most $rate/s; a kill every ~4 s, a ${freeze_s} s freeze every ~9 s, backends terminated"
start_ts=$(date +%s)
"$writer_bin" --writers 4 --seconds "$seconds" --changes "$changes" --rate "$rate" \
    --stats "$work/writer.stats" --progress "$work/writer.progress" >"$work/writer.log" 2>&1 &
writer_pid=$!
# A session that reads its own writes from the transactional projection, all along.
psql -qX -v ON_ERROR_STOP=1 -c "CALL torture.read_your_writes($seconds)" >"$work/ryw.log" 2>&1 &
ryw_pid=$!

killed=0 stopped=0 terminated=0 tick=0 frozen_pid= frozen_slot= thaw_at=0
thaw() {
    [ -n "$frozen_pid" ] || return 0
    kill -CONT "$frozen_pid" 2>/dev/null || true
    record "$frozen_pid" "$frozen_slot" cont
    frozen_pid=
}
while kill -0 "$writer_pid" 2>/dev/null && [ "$tick" -lt 10000 ]; do
    tick=$((tick + 1))
    now=$(date +%s)
    [ -n "$frozen_pid" ] && [ "$now" -ge "$thaw_at" ] && thaw
    if [ $((tick % 4)) = 0 ]; then
        slot=${slots[$((RANDOM % ${#slots[@]}))]}
        pid=$(cat "$work/$slot.pid" 2>/dev/null || echo)
        if [ -n "$pid" ] && [ "$pid" != "$frozen_pid" ] && kill -KILL "$pid" 2>/dev/null; then
            record "$pid" "$slot" kill
            killed=$((killed + 1))
        fi
    fi
    if [ $((tick % 9)) = 5 ] && [ -z "$frozen_pid" ]; then
        slot=${slots[$((RANDOM % ${#slots[@]}))]}
        pid=$(cat "$work/$slot.pid" 2>/dev/null || echo)
        if [ -n "$pid" ] && kill -STOP "$pid" 2>/dev/null; then
            record "$pid" "$slot" stop
            frozen_pid=$pid frozen_slot=$slot thaw_at=$((now + freeze_s))
            stopped=$((stopped + 1))
        fi
    fi
    terminated=$((terminated + $(terminate_consumer_backends)))
    sleep 1
done
wait "$writer_pid" || { echo "consumer_faults: writer failed:"; cat "$work/writer.log"; exit 1; }
thaw
psql -qX -c "INSERT INTO torture.ryw_stop DEFAULT VALUES" >/dev/null
wait "$ryw_pid" || { echo "consumer_faults: the read-your-writes session failed:"; cat "$work/ryw.log"; exit 1; }
write_s=$(( $(date +%s) - start_ts ))
echo "   writers: $(cat "$work/writer.stats") in ${write_s}s; $killed kills, $stopped freezes, $terminated backends terminated"

echo "== waiting for the consumers to catch up (at most ${catchup_timeout}s)"
catchup_start=$(date +%s) last= still=0
while :; do
    read -r exact_behind project_behind < <(psql -qXAt -F ' ' -f test/consumer_faults/progress.sql)
    [ "$exact_behind" = 0 ] && [ "$project_behind" = 0 ] && break
    waited=$(( $(date +%s) - catchup_start ))
    if [ "$exact_behind.$project_behind" = "$last" ]; then still=$((still + 2)); else still=0; fi
    last=$exact_behind.$project_behind
    if [ "$waited" -ge "$catchup_timeout" ] || [ "$still" -ge 60 ]; then
        echo "   gave up after ${waited}s: transactional $exact_behind behind, projector $project_behind behind"
        break
    fi
    sleep 2
done
sleep 2  # room for a stray late call
catchup_s=$(( $(date +%s) - catchup_start ))

echo "== checking"
result=$(psql -qXAt -v ON_ERROR_STOP=1 -f test/consumer_faults/check.sql | tail -1)
get() { sed -n "s/.*\(^\| \)$1=\([0-9-]*\).*/\2/p" <<<"$result"; }
# The fence at work: checkpoints of resumed (frozen) instances refused.
fenced=$(cat "$work"/exact-*.log "$work"/project-*.log 2>/dev/null | grep -c "is no longer held" || true)
status=PASS
for k in exact_applied_twice exact_missing exact_projection_mismatch project_missing project_unexplained \
         project_same_process ryw_missing ryw_timeout; do
    v=$(get "$k")
    [ -n "$v" ] && [ "$v" = 0 ] || status=FAIL
done
[ "$(get ryw_seen)" -ge 10 ] || status=FAIL  # the session did read its writes, many times
changes_done=$(sed -n 's/.*\bchanges=\([0-9]*\).*/\1/p' "$work/writer.stats")
echo "consumer faults: transactional applied-twice=$(get exact_applied_twice) missing=$(get exact_missing)" \
     "projection-mismatch=$(get exact_projection_mismatch);" \
     "projector duplicates=$(get project_duplicates) (after a kill $(get project_after_kill)," \
     "after a freeze past the lease $(get project_after_freeze), unexplained $(get project_unexplained)," \
     "by the same process $(get project_same_process))" \
     "missing=$(get project_missing); read-your-writes seen=$(get ryw_seen) missing=$(get ryw_missing)" \
     "timeout=$(get ryw_timeout) wait-p50-ms=$(get ryw_wait_p50_ms) max-ms=$(get ryw_wait_max_ms);" \
     "changes=$changes_done kills=$(get kills) freezes=$(get stops)" \
     "terminated=$terminated fenced=$fenced write_s=$write_s catchup_s=$catchup_s result=$status"
if [ "$status" != PASS ]; then
    echo "details: tables torture.project_calls, torture.faults, torture.exact_applied (run with --keep);" \
         "consumer logs in $work"
    exit 1
fi
