#!/usr/bin/env bash
# A point-in-time restore forks history: positions a reader stored outside the
# database on the abandoned branch must be refused, never read on with gaps.
#   a primary archives its WAL; a base backup; writes, with positions kept in
#   the shell (as a reader would keep them in a file) before a named restore
#   point and after it; the backup is restored to the restore point
#   (recovery.signal, recovery_target_name, a new timeline); then 300 new
#   transactions, which reuse the transaction ids of the abandoned branch.
# Checked on the restored server: every position of the abandoned branch fails
# with CF017, before and after the 300 transactions (the transaction-id check
# of the codec alone lets them through once the ids are reused); the
# positions from before the restore point read on and deliver every change of
# the new history, none skipped.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/pitr.sh [--port N] [--keep]     (uses ports N and N+1)
# Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source test/support/checks.sh
stage_options pitr.sh 55474 "$@"
stage_scratch pitr
primary=$scratch/primary restored=$scratch/restored archive=$scratch/archive
trap 'stage_cleanup "$primary" "$restored"' EXIT

q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$1" -p "$(cat "$1/port")" -U postgres -d postgres -c "$2"; }
try() { psql_try -h "$1" -p "$(cat "$1/port")" -U postgres -d postgres -c "$2"; }
# docs DIR SINCE: "doc_id v" of every change after SINCE.
docs() {
    q "$1" "SELECT doc_id || ' ' || coalesce(current->>'v', '-')
              FROM changefeed.read('docs', '$2', max_changes => 100000)"
}
# refused NAME POSITION: reading from POSITION on the restored server fails with CF017.
refused() {
    local out
    out=$(try "$restored" "SELECT count(*) FROM changefeed.read('docs', '$2', max_changes => 100000)")
    check "$1" CF017 "${out%% *}"
}

mkdir -p "$archive"
chown postgres "$archive" 2>/dev/null || true
bash test/cluster.sh start "$primary" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 0" \
    --conf "archive_mode = on" --conf "archive_command = 'cp %p $archive/%f'"
q "$primary" "CREATE EXTENSION changefeed"
q "$primary" "CREATE TABLE docs (id int PRIMARY KEY, v text)"
q "$primary" "SELECT changefeed.enable('docs', ranges => 4)" >/dev/null
mkdir -p "$restored"
chown postgres "$restored" 2>/dev/null || true
as_postgres "$PGBIN/pg_basebackup" -h "$primary" -p "$port" -U postgres -D "$restored/data" -X stream -c fast

echo "== the original history: A, the restore point, then B and C"
p_start=$(q "$primary" "SELECT changefeed.current_position()")
q "$primary" "INSERT INTO docs SELECT g, 'A' FROM generate_series(1, 50) g"
p_a=$(q "$primary" "SELECT changefeed.current_position()")
# A window position inside A, taken before the restore point too.
p_a_window=$(q "$primary" "SELECT \"position\" FROM changefeed.read('docs', '$p_start', max_changes => 20) ORDER BY seq DESC LIMIT 1")
q "$primary" "SELECT pg_create_restore_point('before_b')" >/dev/null
q "$primary" "INSERT INTO docs SELECT g, 'B' FROM generate_series(51, 100) g"
p_b=$(q "$primary" "SELECT changefeed.current_position()")
p_b_window=$(q "$primary" "SELECT \"position\" FROM changefeed.read('docs', '$p_a', max_changes => 20) ORDER BY seq DESC LIMIT 1")
for i in $(seq 1 20); do q "$primary" "UPDATE docs SET v = 'C' WHERE id = $i"; done
p_c=$(q "$primary" "SELECT changefeed.current_position()")
branch_xmax=$(q "$primary" "SELECT pg_snapshot_xmax(pg_current_snapshot())")
check "original: 50 changes of A, 50 of B, 20 of C from the first position" "50 A 50 B 20 C" \
    "$(docs "$primary" "$p_start" | awk '{ n[$2]++ } END { printf "%d A %d B %d C", n["A"], n["B"], n["C"] }')"
# Everything into the archive, then the original server goes away.
segment=$(q "$primary" "SELECT pg_walfile_name(pg_current_wal_lsn())")
q "$primary" "SELECT pg_switch_wal()" >/dev/null
for _ in $(seq 300); do
    [ -f "$archive/$segment" ] && break
    sleep 0.1
done
[ -f "$archive/$segment" ] || { echo "pitr.sh: $segment was not archived" >&2; exit 1; }
bash test/cluster.sh stop "$primary"

echo "== restored to the restore point before B"
{
    echo "port = $((port + 1))"
    echo "unix_socket_directories = '$restored'"
    echo "archive_mode = off"
    echo "restore_command = 'cp $archive/%f %p'"
    echo "recovery_target_name = 'before_b'"
    echo "recovery_target_action = 'promote'"
} >>"$restored/data/postgresql.conf"
as_postgres touch "$restored/data/recovery.signal"
echo $((port + 1)) >"$restored/port"
as_postgres "$PGBIN/pg_ctl" -D "$restored/data" -l "$restored/server.log" -w -t 60 start >/dev/null
for _ in $(seq 300); do
    [ "$(q "$restored" "SELECT pg_is_in_recovery()")" = f ] && break
    sleep 0.1
done
check "restored: out of recovery, on timeline 2" "f 00000002" \
    "$(q "$restored" "SELECT pg_is_in_recovery()") $(q "$restored" "SELECT left(pg_walfile_name(pg_current_wal_lsn()), 8)")"
check "restored: A is there, B and C are not" "50|0" \
    "$(q "$restored" "SELECT count(*) FILTER (WHERE v = 'A'), count(*) FILTER (WHERE v <> 'A') FROM docs")"

refused "restored: the position after B fails with CF017" "$p_b"
refused "restored: the window position inside B fails with CF017" "$p_b_window"
refused "restored: the position after C fails with CF017" "$p_c"
out=$(try "$restored" "SELECT count(*) FROM changefeed.read('docs', '$p_c')")
check "restored: ... not as a forged or a future position (CF004)" no "$([ "${out%% *}" = CF004 ] && echo yes || echo no)"
check "restored: the first position reads the 50 changes of A" "50 A" \
    "$(docs "$restored" "$p_start" | awk '{ n[$2]++ } END { for (k in n) print n[k], k }')"
check "restored: the position after A reads on (nothing yet)" "" "$(docs "$restored" "$p_a")"
check "restored: the window position inside A reads the 30 changes left" 30 "$(docs "$restored" "$p_a_window" | wc -l)"

echo "== 300 new transactions on the restored history"
q "$restored" "DO \$\$ BEGIN FOR i IN 1..300 LOOP INSERT INTO docs VALUES (1000 + i, 'N'); COMMIT; END LOOP; END \$\$"
check "restored: the new transactions reuse ids of the abandoned branch (its snapshot's xmax $branch_xmax)" t \
    "$(q "$restored" "SELECT max(txid) >= '$branch_xmax'::xid8 AND min(txid) FILTER (WHERE (current->>'v') = 'N') < '$branch_xmax'::xid8
                        FROM changefeed.log")"
refused "restored, after 300 transactions: the position after B still fails with CF017" "$p_b"
refused "restored, after 300 transactions: the window position inside B still fails with CF017" "$p_b_window"
refused "restored, after 300 transactions: the position after C still fails with CF017" "$p_c"
check "restored: the position after A reads all 300 new changes, none skipped" "300 N" \
    "$(docs "$restored" "$p_a" | awk '{ n[$2]++ } END { for (k in n) print n[k], k }')"
check "restored: the first position reads A and the 300, once each" "350 350" \
    "$(docs "$restored" "$p_start" | wc -l) $(docs "$restored" "$p_start" | sort -u | wc -l)"
check "restored: the window position inside A reads the rest of A and the 300" 330 "$(docs "$restored" "$p_a_window" | wc -l)"
p_new=$(q "$restored" "SELECT changefeed.current_position()")
q "$restored" "INSERT INTO docs VALUES (5000, 'M')"
check "restored: a position of the new history reads on" "5000 M" "$(docs "$restored" "$p_new")"

stage_summary
