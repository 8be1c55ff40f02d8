#!/usr/bin/env bash
# pgBackRest 2.45: a full backup with WAL archiving, then a restore to a point
# in time into another data directory, where processors resume.
#   The primary archives through `pgbackrest archive-push`; a full backup is
#   taken; a processor ("billing", its own process) reads every change.  Rows
#   A are written and the processor checkpoints them (changefeed.wait_for);
#   a named restore point; rows B are written and checkpointed too, and the
#   position after them kept.  pgBackRest restores the backup into a new data
#   directory up to the restore point (recovery_target_name, promote) and
#   the original server goes away.  On the restored server the processor
#   starts again, rows C are written.
# Checked: the restored server has A and not B; the processor resumes from
# its checkpoint (after A) and delivers every row of C, and nothing of B;
# the position kept after B is refused (CF017), never read from with a gap;
# the notifier and the maintainer run on the restored server, and maintain()
# succeeds there.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/pgbackrest.sh [--port N] [--build-dir DIR] [--no-build] [--keep]   (ports N and N+1)
# Installs pgbackrest if missing.  Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source test/support/checks.sh
port=55462 build_dir=build build=1 keep=0
parse_options pgbackrest.sh --port=port --build-dir=build_dir --no-build=build:0 --keep=keep:1 -- "$@"
debian_packages pgbackrest
[ "$build" = 0 ] || cmake_targets "$build_dir" cf_processor_runner
runner_bin=$(built_program pgbackrest.sh "$build_dir" cf_processor_runner)

stage_scratch pgbackrest
primary=$scratch/primary restored=$scratch/restored
runner=
finish() {
    [ -z "$runner" ] || { kill "$runner" 2>/dev/null || true; wait "$runner" 2>/dev/null || true; }
    stage_cleanup "$primary" "$restored"
}
trap finish EXIT
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$1" -p "$(cat "$1/port")" -U postgres -d postgres -c "$2"; }
try() { psql_try -h "$1" -p "$(cat "$1/port")" -U postgres -d postgres -c "$2"; }

mkdir -p "$scratch/repo" "$scratch/log" "$scratch/lock" "$restored"
cat >"$scratch/pgbackrest.conf" <<EOF
[global]
repo1-path=$scratch/repo
log-path=$scratch/log
lock-path=$scratch/lock
log-level-console=warn
repo1-retention-full=2
start-fast=y

[main]
pg1-path=$primary/data
pg1-socket-path=$primary
pg1-port=$port
EOF
chown -R postgres "$scratch"
backrest() { as_postgres pgbackrest --config="$scratch/pgbackrest.conf" --stanza=main "$@"; }

bash test/cluster.sh start "$primary" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 0" \
    --conf "archive_mode = on" \
    --conf "archive_command = 'pgbackrest --config=$scratch/pgbackrest.conf --stanza=main archive-push %p'"
q "$primary" "CREATE EXTENSION changefeed"
q "$primary" "CREATE TABLE docs (id int PRIMARY KEY, v text)"
q "$primary" "SELECT changefeed.enable('docs', ranges => 4)" >/dev/null

echo "== stanza, check, full backup"
backrest stanza-create
backrest check
backrest backup --type=full
check "a full backup is in the repository" 1 \
    "$(backrest info --output=json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)[0]["backup"]))')"

# start_runner DIR: the processor "billing" on the server in DIR, in the background.
start_runner() {
    "$runner_bin" "host=$1 port=$(cat "$1/port") user=postgres dbname=postgres" public.docs billing billing-1 \
        "$scratch/delivered" >>"$scratch/runner.log" 2>&1 &
    runner=$!
}
stop_runner() { kill "$runner"; wait "$runner" 2>/dev/null || true; runner=; }
# checkpointed DIR: waits until billing has checkpointed everything committed so far.
checkpointed() {
    q "$1" "SELECT changefeed.wait_for('docs', 'billing', changefeed.current_position(), '60 seconds')" >/dev/null
}

echo "== the processor reads A; a restore point; it reads B"
start_runner "$primary"
for _ in $(seq 100); do
    [ "$(q "$primary" "SELECT count(*) FROM changefeed.processor_status WHERE processor = 'billing' AND live")" = 4 ] && break
    sleep 0.1
done
q "$primary" "INSERT INTO docs SELECT g, 'A' FROM generate_series(1, 50) g"
checkpointed "$primary"
q "$primary" "SELECT pg_create_restore_point('before_b')" >/dev/null
q "$primary" "INSERT INTO docs SELECT g, 'B' FROM generate_series(51, 100) g"
checkpointed "$primary"
p_b=$(q "$primary" "SELECT changefeed.current_position()")
stop_runner
check "the processor delivered A and B on the original server" 100 "$(sort -u "$scratch/delivered" | wc -l)"
backrest check  # switches WAL and waits until it is archived
bash test/cluster.sh stop "$primary"
: >"$scratch/delivered"

echo "== restored by pgBackRest into another data directory, to the restore point"
backrest restore --pg1-path="$restored/data" --type=name --target=before_b --target-action=promote
{
    echo "port = $((port + 1))"
    echo "unix_socket_directories = '$restored'"
    echo "archive_mode = off"
} | as_postgres tee -a "$restored/data/postgresql.conf" >/dev/null
echo $((port + 1)) >"$restored/port"
as_postgres "$PGBIN/pg_ctl" -D "$restored/data" -l "$restored/server.log" -w -t 120 start >/dev/null
for _ in $(seq 600); do
    [ "$(q "$restored" "SELECT pg_is_in_recovery()")" = f ] && break
    sleep 0.1
done
check "restored: promoted" f "$(q "$restored" "SELECT pg_is_in_recovery()")"
check "restored: A is there, B is not" "50|0" \
    "$(q "$restored" "SELECT count(*) FILTER (WHERE v = 'A'), count(*) FILTER (WHERE v = 'B') FROM docs")"
out=$(try "$restored" "SELECT count(*) FROM changefeed.read('docs', '$p_b')")
check "restored: the position kept after B is refused (CF017)" CF017 "${out%% *}"

echo "== the processor resumes on the restored server; rows C"
start_runner "$restored"
q "$restored" "INSERT INTO docs SELECT g, 'C' FROM generate_series(101, 130) g"
checkpointed "$restored"
stop_runner
check "restored: the processor delivered every row of C, and nothing of B" "30 0" \
    "$(awk '$1 > 100 { c++ } $1 > 50 && $1 <= 100 { b++ } END { print c + 0, b + 0 }' "$scratch/delivered")"
check "restored: it resumed from its checkpoint after A (A not read again)" 0 \
    "$(awk '$1 <= 50 { a++ } END { print a + 0 }' "$scratch/delivered")"
check "restored: the notifier and the maintainer run" "changefeed maintainer,changefeed notifier" \
    "$(q "$restored" "SELECT string_agg(backend_type, ',' ORDER BY backend_type) FROM pg_stat_activity
                       WHERE backend_type LIKE 'changefeed %' AND datname = current_database()")"
out=$(try "$restored" "SELECT coalesce(cardinality(failed_steps), 0) FROM changefeed.maintain()")
check "restored: maintain() succeeds, no step failed" "OK 0" "$out"

stage_summary
