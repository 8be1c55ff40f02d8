#!/usr/bin/env bash
# Extension upgrades, on a throwaway cluster with the library preloaded:
#   1. catalog: a fresh `CREATE EXTENSION changefeed` and the last release
#      installed then `ALTER EXTENSION changefeed UPDATE` end with the same
#      objects (test/stages/upgrade/describe.sql describes them; any difference fails
#      with the diff);
#   2. continuity: with the release installed, a table with 4 ranges is
#      enabled and written, a reader keeps a position from read() and a
#      processor checkpoints its ranges through the lease_* functions; then
#      the extension is updated and more is written.  The saved position reads
#      exactly the changes after it, and a client processor started after the
#      update (test/support/processor_runner.cpp) resumes from the release's
#      checkpoints and delivers exactly the rest: nothing lost, nothing twice.
#      The update takes the release's key file (changefeed_position.key) over
#      into changefeed.position_key, which is why the saved positions read on.
#      The notifier wakes a listener before and after the update;
#   3. a dump of a database still at the release restores into the working
#      version with its collections, processors and checkpoints.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/upgrade.sh [--port N] [--build-dir DIR] [--no-build] [--keep]
# --build-dir: the CMake build directory holding (or to build) cf_processor_runner.
# Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source test/support/checks.sh
port=55488 build_dir=build build=1 keep=0
parse_options upgrade.sh --port=port --build-dir=build_dir --no-build=build:0 --keep=keep:1 -- "$@"

# The last release (the newest script kept in extension/releases/) and the
# working version.
release=$(cd extension/releases && ls changefeed--*.sql | sed 's/^changefeed--\(.*\)\.sql$/\1/' | sort -V | tail -1)
current=$(sed -n "s/^default_version = '\(.*\)'\$/\1/p" extension/changefeed.control)
echo "== upgrading from release $release to $current"

[ "$build" = 0 ] || cmake_targets "$build_dir" cf_processor_runner
runner=$(built_program upgrade.sh "$build_dir" cf_processor_runner)

stage_scratch upgrade
runner_pid= listener_pid=
cleanup() {
    [ -z "$runner_pid" ] || kill "$runner_pid" 2>/dev/null || true
    [ -z "$listener_pid" ] || kill "$listener_pid" 2>/dev/null || true
    stage_cleanup "$scratch/cluster"
}
trap cleanup EXIT

# The maintainer stays idle: the catalog comparison wants no partition made
# or dropped between the two installs.
bash test/cluster.sh start "$scratch/cluster" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 0"
eval "$(bash test/cluster.sh env "$scratch/cluster")"
# The runner reaches the cluster through its socket folder.
chmod 755 "$scratch/cluster"

# q DB SQL [psql options]: the result rows, unaligned; fails the script on an SQL error.
q() { local db=$1 sql=$2; shift 2; "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@" -c "$sql"; }
# try DB SQL: prints "OK <rows>" or "<SQLSTATE> <message>"; never fails.
try() { psql_try -d "$1" -c "$2"; }
# same NAME FILE_A FILE_B: passes when the sorted lines are equal, else shows the difference.
same() {
    if diff <(sort "$2") <(sort "$3") >"$scratch/diff" 2>&1; then
        pass "$1"
    else
        fail "$1" "$(head -n 40 "$scratch/diff")"
    fi
}

echo "== 1. catalog: a fresh install and an upgraded one have the same objects"
# The upgrade runs first: roles are shared by the cluster, and a role the
# working version needs must come from the upgrade script, not from a fresh
# install made before it.
q postgres "CREATE DATABASE upgraded"
q upgraded "CREATE EXTENSION changefeed VERSION '$release'"
check "upgraded: installs at $release" "$release" "$(q upgraded "SELECT extversion FROM pg_extension WHERE extname = 'changefeed'")"
out=$(try upgraded "ALTER EXTENSION changefeed UPDATE")
check "upgraded: ALTER EXTENSION changefeed UPDATE succeeds" "OK " "$out"
check "upgraded: the update reaches $current" "$current" \
    "$(q upgraded "SELECT extversion FROM pg_extension WHERE extname = 'changefeed'")"
q postgres "CREATE DATABASE fresh"
q fresh "CREATE EXTENSION changefeed"
"$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d fresh -f test/stages/upgrade/describe.sql >"$scratch/fresh.txt"
"$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d upgraded -f test/stages/upgrade/describe.sql >"$scratch/upgraded.txt"
if diff -u --label "fresh install ($current)" --label "upgraded ($release -> $current)" \
        "$scratch/fresh.txt" "$scratch/upgraded.txt" >"$scratch/catalog.diff"; then
    pass "fresh and upgraded describe alike ($(wc -l <"$scratch/fresh.txt") lines: $(grep -c '^members: ' "$scratch/fresh.txt") members)"
else
    fail "fresh and upgraded describe alike: the upgrade script misses what the concern files changed ($(grep -c '^[-+][^-+]' "$scratch/catalog.diff") lines differ)" \
        "$(head -n 80 "$scratch/catalog.diff")"
fi

echo "== 2. continuity: positions and checkpoints of $release read on after the update"
q postgres "CREATE DATABASE cont"
q cont "CREATE EXTENSION changefeed VERSION '$release'"
q cont "CREATE TABLE public.docs (id int PRIMARY KEY, v text NOT NULL)"
cid=$(q cont "SELECT changefeed.enable('public.docs', ranges => 4)")
# The processor's role is no superuser: its processor must still be its own after the update.
q postgres "DROP ROLE IF EXISTS upgrade_feed" 2>/dev/null
q postgres "CREATE ROLE upgrade_feed LOGIN IN ROLE changefeed_processor"
q cont "GRANT SELECT ON public.docs TO upgrade_feed"
# The processor starts, and the reader takes its position, before any write.
q cont "SELECT changefeed.lease_init('docs', 'proc')" -U upgrade_feed >/dev/null
pos0=$(q cont "SELECT changefeed.current_position()")
# Every change below is told apart by "doc_id v" (v is null for a delete: "-").
q cont "INSERT INTO docs SELECT g, 'c1' FROM generate_series(1, 40) g"
q cont "UPDATE docs SET v = 'r1' WHERE id <= 10"
q cont "DELETE FROM docs WHERE id BETWEEN 31 AND 35"

# The reader reads part of the feed and keeps the position text.
q cont "SELECT event_id, \"position\" FROM changefeed.read('docs', '$pos0', max_changes => 20)" -F ' ' >"$scratch/read1"
cut -d' ' -f1 "$scratch/read1" >"$scratch/read1.ids"
pos1=$(tail -1 "$scratch/read1" | cut -d' ' -f2)
check "$release: the reader got the 20 changes it asked for" 20 "$(wc -l <"$scratch/read1.ids")"

# The processor (as its role) takes every lease, reads up to 4 changes per
# range and checkpoints after them, then lets the leases go.
q cont "
CREATE TEMP TABLE delivered (change text);
DO \$\$
DECLARE
    l record;
    r record;
    pos text;
BEGIN
    FOR l IN SELECT * FROM changefeed.lease_acquire('docs', 'proc', 'sql-1', '10 minutes') LOOP
        pos := l.checkpoint;
        FOR r IN SELECT * FROM changefeed.read('docs', l.checkpoint, max_changes => 4, ranges => ARRAY[l.range_id]) LOOP
            INSERT INTO delivered VALUES (r.doc_id || ' ' || coalesce(r.current->>'v', '-'));
            pos := r.position;
        END LOOP;
        PERFORM changefeed.lease_checkpoint('docs', 'proc', l.range_id, 'sql-1', l.epoch, pos);
    END LOOP;
    PERFORM changefeed.lease_release('docs', 'proc', 'sql-1');
END
\$\$;
SELECT change FROM delivered;" -U upgrade_feed >"$scratch/proc1"
check "$release: the processor delivered 4 changes in each of 4 ranges" 16 "$(wc -l <"$scratch/proc1")"
q cont "SELECT range_id || ' ' || checkpoint FROM changefeed.lease WHERE processor = 'proc' ORDER BY range_id" \
    >"$scratch/checkpoints-$release"

# A dump while the release is installed, for part 3.
"$PGBIN/pg_dump" -Fc -d cont -f "$scratch/cont-$release.dump"
q cont "SELECT c.relid::text, c.ranges, p.name, p.owner_role, l.range_id, l.checkpoint
          FROM changefeed.collection c JOIN changefeed.processor p ON p.collection_id = c.id
          JOIN changefeed.lease l ON l.collection_id = c.id AND l.processor = p.name
         ORDER BY 1, 3, 5" >"$scratch/dumped-state"

# A listener on the collection's channel, in its own session across the update.
coproc LISTENER { "$PGBIN/psql" -X -q -At -d cont 2>&1; }
listener_pid=$LISTENER_PID
# Plain copies of the coprocess's pipes: bash closes its own in subshells.
exec {listener_in}<&"${LISTENER[0]}" {listener_out}>&"${LISTENER[1]}"
echo "LISTEN changefeed_$cid;" >&"$listener_out"
mark=0
# listen_round: one statement in the listener's session; prints the pid of
# each notification on the channel received by then.  psql prints a
# notification after the next statement's result, so each round's marker
# also flushes what arrived during the previous round.
listen_round() {
    local line
    mark=$((mark + 1))
    echo "SELECT 'mark-$mark';" >&"$listener_out"
    while read -r -t 10 -u "$listener_in" line; do
        [[ "$line" =~ ^Asynchronous\ notification\ \"changefeed_$cid\".*PID\ ([0-9]+) ]] && echo "${BASH_REMATCH[1]}"
        [ "$line" = "mark-$mark" ] && break
    done
    return 0
}
# notified: waits up to 10 s for a notification on the channel; prints the
# sender's pid, or nothing.
notified() {
    local deadline=$((SECONDS + 10)) pid=
    while [ -z "$pid" ] && [ "$SECONDS" -lt "$deadline" ]; do
        pid=$(listen_round | head -1)
        [ -n "$pid" ] || sleep 0.2
    done
    echo "$pid"
}
# check_woken NAME SENDER: the sender is the database's notifier worker.
check_woken() {
    local worker
    worker=$(q cont "SELECT pid FROM pg_stat_activity WHERE backend_type = 'changefeed notifier' AND datname = 'cont'")
    if [ -n "$2" ] && [ "$2" = "$worker" ]; then
        pass "$1 (notifier pid $worker)"
    else
        fail "$1" "notification from pid '${2:-none}', notifier worker pid '${worker:-none}'"
    fi
}
listen_round >/dev/null   # anything pending
q cont "INSERT INTO docs VALUES (101, 'n1')"
check_woken "$release: the notifier wakes the listener" "$(notified)"

# The release kept its key in the data directory; the update takes it over.
check "$release: the position key is the data directory's file" yes \
    "$(q cont "SELECT CASE WHEN length(pg_read_binary_file('changefeed_position.key')) = 32 THEN 'yes' END")"
q cont "ALTER EXTENSION changefeed UPDATE"
check "cont: updated to $current" "$current" "$(q cont "SELECT extversion FROM pg_extension WHERE extname = 'changefeed'")"
check "$current: the update took the key file over into changefeed.position_key" t \
    "$(q cont "SELECT key = pg_read_binary_file('changefeed_position.key') FROM changefeed.position_key")"
check "$current: every partition the old release made keeps rows of up to a page whole" t \
    "$(q cont "SELECT count(*) > 1 AND bool_and(coalesce(c.reloptions @> ARRAY['toast_tuple_target=8160'], false))
               FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'changefeed.log'::regclass")"

listen_round >/dev/null
q cont "INSERT INTO docs VALUES (102, 'n2')"
check_woken "$current: the notifier still wakes the listener after the update" "$(notified)"
echo "\\q" >&"$listener_out"
exec {listener_in}<&- {listener_out}>&-
wait "$listener_pid" 2>/dev/null || true
listener_pid=

q cont "INSERT INTO docs SELECT g, 'c2' FROM generate_series(41, 70) g"
q cont "UPDATE docs SET v = 'r2' WHERE id BETWEEN 11 AND 20"
q cont "DELETE FROM docs WHERE id BETWEEN 36 AND 38"
q cont "UPDATE docs SET v = 'r3' WHERE id <= 5"
# 40 + 10 + 5 before the update, 2 around it, 30 + 10 + 3 + 5 after.
expected=105

# Everything the feed holds, read from the first position after the update.
q cont "SELECT event_id || ' ' || doc_id || ' ' || coalesce(current->>'v', '-')
          FROM changefeed.read('docs', '$pos0', max_changes => 100000)" >"$scratch/all"
check "$current: the feed holds every change written, once" "$expected $expected" \
    "$(wc -l <"$scratch/all") $(cut -d' ' -f1 "$scratch/all" | sort -u | wc -l)"
cut -d' ' -f1 "$scratch/all" >"$scratch/all.ids"
cut -d' ' -f2- "$scratch/all" >"$scratch/all.changes"

# The reader goes on from the position text it kept under the release.
out=$(try cont "SELECT count(*) FROM changefeed.read('docs', '$pos1', max_changes => 100000)")
check "$current: the position saved under $release is accepted" OK "${out%% *}"
q cont "SELECT event_id FROM changefeed.read('docs', '$pos1', max_changes => 100000)" >"$scratch/read2.ids"
check "$current: the saved position reads no change twice" "" "$(sort "$scratch/read1.ids" "$scratch/read2.ids" | uniq -d | head -5)"
cat "$scratch/read1.ids" "$scratch/read2.ids" >"$scratch/read.ids"
same "$current: before and after the update, the reader got every change exactly once" "$scratch/all.ids" "$scratch/read.ids"

# A client processor resumes from the checkpoints the release's SQL took.
check "$current: the checkpoints are the ones taken under $release" "$(cat "$scratch/checkpoints-$release")" \
    "$(q cont "SELECT range_id || ' ' || checkpoint FROM changefeed.lease WHERE processor = 'proc' ORDER BY range_id")"
rest=$((expected - $(wc -l <"$scratch/proc1")))
"$runner" "host=$PGHOST port=$PGPORT dbname=cont user=upgrade_feed" public.docs proc runner-1 "$scratch/runner.out" \
    --all-versions >"$scratch/runner.log" 2>&1 &
runner_pid=$!
touch "$scratch/runner.out"
deadline=$((SECONDS + 60))
while [ "$(wc -l <"$scratch/runner.out")" -lt "$rest" ] && [ "$SECONDS" -lt "$deadline" ] && kill -0 "$runner_pid" 2>/dev/null; do
    sleep 0.2
done
sleep 1   # anything delivered twice would come now
kill "$runner_pid" 2>/dev/null || true
wait "$runner_pid" 2>/dev/null || true
runner_pid=
cut -d' ' -f1,2 "$scratch/runner.out" >"$scratch/runner.changes"
check "$current: the client processor delivered the $rest changes left" "$rest" "$(wc -l <"$scratch/runner.changes")"
check "$current: the client processor delivered nothing the release's processor had" "" \
    "$(sort -u "$scratch/proc1" | comm -12 - <(sort -u "$scratch/runner.changes") | head -5)"
cat "$scratch/proc1" "$scratch/runner.changes" >"$scratch/processed"
same "$current: before and after the update, the processor handled every change exactly once" \
    "$scratch/all.changes" "$scratch/processed"
check "$current: the processor is still its role's" "upgrade_feed" \
    "$(q cont "SELECT DISTINCT p.owner_role FROM changefeed.processor p WHERE p.name = 'proc'")"

echo "== 3. a dump taken under $release restores into $current"
q postgres "CREATE DATABASE restored TEMPLATE template0"
rc=0
"$PGBIN/pg_restore" -d restored "$scratch/cont-$release.dump" >"$scratch/restore.log" 2>&1 || rc=$?
if [ "$rc" -eq 0 ] && ! grep -qi error "$scratch/restore.log"; then
    pass "restored: pg_restore exits 0 without errors"
else
    fail "restored: pg_restore exits 0 without errors (exit $rc)" "$(head -n 40 "$scratch/restore.log")"
fi
check "restored: the extension is at $current" "$current" \
    "$(q restored "SELECT extversion FROM pg_extension WHERE extname = 'changefeed'")"
check "restored: collections, processors and checkpoints as dumped" "$(cat "$scratch/dumped-state")" \
    "$(q restored "SELECT c.relid::text, c.ranges, p.name, p.owner_role, l.range_id, l.checkpoint
                     FROM changefeed.collection c JOIN changefeed.processor p ON p.collection_id = c.id
                     JOIN changefeed.lease l ON l.collection_id = c.id AND l.processor = p.name
                    ORDER BY 1, 3, 5")"
pos=$(q restored "SELECT changefeed.current_position()")
q restored "INSERT INTO docs VALUES (1001, 'restored')"
check "restored: a new write is captured and read back" "1001 restored" \
    "$(q restored "SELECT doc_id || ' ' || (current->>'v') FROM changefeed.read('docs', '$pos')")"

bash test/cluster.sh stop "$scratch/cluster"
stage_summary
