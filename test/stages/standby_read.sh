#!/usr/bin/env bash
# Reads on a hot standby, and positions across a promotion, the way HA
# clusters are built: a primary with the library preloaded and a streaming
# standby made with `pg_basebackup -R` before `CREATE EXTENSION` and before
# the first position.
#   1. the position key comes to the standby with the WAL (it is a row of
#      changefeed.position_key): no key file on either server, the same key;
#   2. on the hot standby, current_position(), read() from the primary's
#      positions and from the standby's own, and read_ranges() work and return
#      what the primary returns; a standby's position reads on the primary;
#   3. a position the standby has not replayed yet fails with CF016, and reads
#      once replay goes on; a database still at the last release (its key a
#      file on the primary) refuses reads on the standby rather than making a
#      key there, and reads there once ALTER EXTENSION UPDATE took the file
#      over;
#   4. the primary stops (immediate), the standby is promoted (a new
#      timeline): the primary's positions and the standby's, taken before the
#      promotion, read there with nothing lost and nothing twice; a position
#      the primary issued after the last WAL the standby received fails with
#      CF017 (another history), never reads on with a gap.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/standby_read.sh [--port N] [--keep]     (uses ports N and N+1)
# Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source test/support/checks.sh
stage_options standby_read.sh 55470 "$@"
stage_scratch standby
primary=$scratch/primary standby=$scratch/standby
trap 'stage_cleanup "$primary" "$standby"' EXIT

# q DIR SQL: rows of SQL on the server in DIR; fails the script on an SQL error.
q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$1" -p "$(cat "$1/port")" -U postgres -d postgres -c "$2"; }
# try DIR SQL: "OK <rows>" or "<SQLSTATE> <message>"; never fails.
try() { psql_try -h "$1" -p "$(cat "$1/port")" -U postgres -d postgres -c "$2"; }
# wait_replayed: the standby has replayed all the primary wrote.  A position
# carries the primary's insert position, which may be ahead of its flush
# position (a notifier tick, a standby snapshot record): a commit that takes
# an xid flushes past it, so the standby receives it.
wait_replayed() {
    local target
    target=$(q "$primary" "SELECT pg_current_wal_insert_lsn()")
    q "$primary" "SELECT pg_current_xact_id()" >/dev/null
    for _ in $(seq 600); do
        [ "$(q "$standby" "SELECT pg_last_wal_replay_lsn() >= '$target'")" = t ] && return 0
        sleep 0.1
    done
    echo "standby did not replay up to $target" >&2
    return 1
}
# changes DIR SINCE: "event_id doc_id v" of every change after SINCE, in order.
changes() {
    q "$1" "SELECT event_id || ' ' || doc_id || ' ' || coalesce(current->>'v', '-')
              FROM changefeed.read('docs', '$2', max_changes => 100000)"
}
no_key_file() { [ ! -e "$1/data/changefeed_position.key" ] && echo none || echo present; }

echo "== a primary, and a standby made before the extension is created"
bash test/cluster.sh start "$primary" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 0"
mkdir -p "$standby"
chown postgres "$standby" 2>/dev/null || true
as_postgres "$PGBIN/pg_basebackup" -h "$primary" -p "$port" -U postgres -D "$standby/data" -R -X stream -c fast
{
    echo "port = $((port + 1))"
    echo "unix_socket_directories = '$standby'"
    echo "hot_standby_feedback = on"
} >>"$standby/data/postgresql.conf"
echo $((port + 1)) >"$standby/port"
as_postgres "$PGBIN/pg_ctl" -D "$standby/data" -l "$standby/server.log" -w -t 60 start >/dev/null
check "the standby is in recovery" t "$(q "$standby" "SELECT pg_is_in_recovery()")"

q "$primary" "CREATE EXTENSION changefeed"
q "$primary" "CREATE TABLE docs (id int PRIMARY KEY, v text)"
q "$primary" "SELECT changefeed.enable('docs', ranges => 4)" >/dev/null
p0=$(q "$primary" "SELECT changefeed.current_position()")
q "$primary" "INSERT INTO docs SELECT g, 'a' FROM generate_series(1, 100) g"
p1=$(q "$primary" "SELECT \"position\" FROM changefeed.read('docs', '$p0', max_changes => 40) ORDER BY seq DESC LIMIT 1")
q "$primary" "UPDATE docs SET v = 'b' WHERE id <= 50"
q "$primary" "DELETE FROM docs WHERE id > 90"
wait_replayed

echo "== 1. the key comes with the WAL"
check "primary: no key file in the data directory" none "$(no_key_file "$primary")"
check "standby: the same key as the primary's" \
    "$(q "$primary" "SELECT encode(sha256(key), 'hex') FROM changefeed.position_key")" \
    "$(q "$standby" "SELECT encode(sha256(key), 'hex') FROM changefeed.position_key")"

echo "== 2. reads on the hot standby"
changes "$primary" "$p0" >"$scratch/primary.p0"
check "primary: the feed holds 160 changes" 160 "$(wc -l <"$scratch/primary.p0")"
changes "$standby" "$p0" >"$scratch/standby.p0"
check "standby: read() from the primary's first position returns what the primary returns" \
    "$(md5sum <"$scratch/primary.p0")" "$(md5sum <"$scratch/standby.p0")"
changes "$primary" "$p1" >"$scratch/primary.p1"
changes "$standby" "$p1" >"$scratch/standby.p1"
check "standby: read() from the primary's position inside a window (120 left) matches the primary" \
    "120 $(md5sum <"$scratch/primary.p1")" "$(wc -l <"$scratch/standby.p1") $(md5sum <"$scratch/standby.p1")"
s0=$(q "$standby" "SELECT changefeed.current_position()")
check "standby: current_position() works" cf2. "${s0:0:4}"
check "standby: read() from its own position returns nothing yet" 0 "$(changes "$standby" "$s0" | wc -l)"
rr=$(q "$standby" "SELECT count(seq), count(*) FILTER (WHERE seq IS NULL)
                     FROM changefeed.read_ranges('docs', ARRAY[0, 1, 2, 3],
                                                 ARRAY['$p0', '$p0', '$p0', '$p0'], 100000)")
check "standby: read_ranges() of 4 ranges from the primary's position: 160 changes, markers" "160|1" "$rr"
q "$primary" "INSERT INTO docs SELECT g, 'c' FROM generate_series(201, 230) g"
check "primary: read() from the standby's position returns exactly what was written after it" \
    "30 c" "$(changes "$primary" "$s0" | awk '{ n++; v[$3]++ } END { for (k in v) print n, k }')"
wait_replayed
s1=$(q "$standby" "SELECT \"position\" FROM changefeed.read('docs', '$s0', max_changes => 10) ORDER BY seq DESC LIMIT 1")
check "standby: a window position the standby issued reads on there (20 left)" 20 "$(changes "$standby" "$s1" | wc -l)"
check "primary: and on the primary" 20 "$(changes "$primary" "$s1" | wc -l)"

echo "== 3. a position the standby has not replayed yet"
q "$standby" "SELECT pg_wal_replay_pause()" >/dev/null
q "$primary" "INSERT INTO docs SELECT g, 'd' FROM generate_series(301, 310) g"
p2=$(q "$primary" "SELECT changefeed.current_position()")
out=$(try "$standby" "SELECT count(*) FROM changefeed.read('docs', '$p2')")
check "standby (replay paused): the primary's newer position fails with CF016" CF016 "${out%% *}"
q "$standby" "SELECT pg_wal_replay_resume()" >/dev/null
q "$primary" "SELECT 1" >/dev/null
wait_replayed
check "standby (replay resumed): the same position reads" "OK 0" "$(try "$standby" "SELECT count(*) FROM changefeed.read('docs', '$p2')")"
check "standby: still no key file after every read" none "$(no_key_file "$standby")"

echo "== 3b. a transaction still open on the primary while the standby cuts positions"
# A hot standby's snapshots keep the transactions in progress where
# pg_current_snapshot() does not look: a position cut there must still count
# the open transaction as in progress, or its changes are skipped at commit.
"$PGBIN/psql" -X -q -h "$primary" -p "$port" -U postgres -d postgres \
    -c "BEGIN; INSERT INTO docs VALUES (901, 'open'); SELECT pg_sleep(3); COMMIT" >/dev/null &
open_writer=$!
sleep 1
q "$primary" "INSERT INTO docs VALUES (902, 'after')"
wait_replayed
s3=$(q "$standby" "SELECT changefeed.current_position()")
s4=$(q "$standby" "SELECT \"position\" FROM changefeed.read('docs', '$p2', max_changes => 100000) ORDER BY seq DESC LIMIT 1")
check "standby: the position after the change committed later is the one after 902" 902 \
    "$(q "$standby" "SELECT doc_id FROM changefeed.read('docs', '$p2', max_changes => 100000) ORDER BY seq DESC LIMIT 1")"
wait "$open_writer"
q "$primary" "SELECT 1" >/dev/null
wait_replayed
check "standby: current_position() cut while 901 was open reads 901 once it commits" "901" \
    "$(changes "$standby" "$s3" | awk '{ print $2 }' | tr '\n' ' ' | sed 's/ $//')"
check "primary: and so does the primary" "901" "$(changes "$primary" "$s3" | awk '{ print $2 }' | tr '\n' ' ' | sed 's/ $//')"
check "standby: a read's last position, cut while 901 was open, reads 901 once it commits" "901" \
    "$(changes "$standby" "$s4" | awk '{ print $2 }' | tr '\n' ' ' | sed 's/ $//')"

echo "== an installation of the last release, updated while the standby runs"
release=$(cd extension/releases && ls changefeed--*.sql | sed 's/^changefeed--\(.*\)\.sql$/\1/' | sort -V | tail -1)
q "$primary" "CREATE DATABASE old"
qo() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$1" -p "$(cat "$1/port")" -U postgres -d old -c "$2"; }
tryo() {
    local out
    if out=$("$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -h "$1" -p "$(cat "$1/port")" \
        -U postgres -d old -c "$2" 2>&1); then
        echo "OK $out"
    else
        sed -nE '1s/^(psql:[^:]*:[0-9]+: )?ERROR:  ([0-9A-Z]{5}): /\2 /p' <<<"$out" | grep . || echo "?? $out"
    fi
}
qo "$primary" "CREATE EXTENSION changefeed VERSION '$release'"
qo "$primary" "CREATE TABLE t (id int PRIMARY KEY)"
qo "$primary" "SELECT changefeed.enable('t')" >/dev/null
o0=$(qo "$primary" "SELECT changefeed.current_position()")   # $release: the key file, made on the primary
qo "$primary" "INSERT INTO t SELECT generate_series(1, 10)"
wait_replayed
out=$(tryo "$standby" "SELECT count(*) FROM changefeed.read('t', '$o0')")
check "$release on the standby: a read refuses to make a key of its own (55000)" 55000 "${out%% *}"
check "$release on the standby: no key file made" none "$(no_key_file "$standby")"
qo "$primary" "ALTER EXTENSION changefeed UPDATE"
wait_replayed
check "updated: the standby reads the $release position the primary issued" "OK 10" \
    "$(tryo "$standby" "SELECT count(*) FROM changefeed.read('t', '$o0')")"
check "updated: and so does the primary" "OK 10" "$(tryo "$primary" "SELECT count(*) FROM changefeed.read('t', '$o0')")"

echo "== 4. failover: the primary stops, the standby is promoted"
changes "$primary" "$p0" >"$scratch/before-failover"
p3=$(q "$primary" "SELECT changefeed.current_position()")
q "$primary" "CREATE TABLE marker (); DROP TABLE marker"   # one commit after p3, flushed
wait_replayed
# The standby stops receiving (as when the primary's last WAL never reached
# it): what the primary writes now is lost in the failover.
q "$standby" "ALTER SYSTEM SET primary_conninfo = ''" >/dev/null
q "$standby" "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 300); do
    [ "$(q "$standby" "SELECT count(*) FROM pg_stat_wal_receiver")" = 0 ] && break
    sleep 0.1
done
check "the standby no longer receives WAL" 0 "$(q "$standby" "SELECT count(*) FROM pg_stat_wal_receiver")"
q "$primary" "INSERT INTO docs SELECT g, 'lost' FROM generate_series(501, 510) g"
p_lost=$(q "$primary" "SELECT changefeed.current_position()")
bash test/cluster.sh stop "$primary" --immediate
as_postgres "$PGBIN/pg_ctl" -D "$standby/data" -w -t 60 promote >/dev/null
check "promoted: out of recovery" f "$(q "$standby" "SELECT pg_is_in_recovery()")"
check "promoted: on timeline 2" 00000002 "$(q "$standby" "SELECT left(pg_walfile_name(pg_current_wal_lsn()), 8)")"
changes "$standby" "$p0" >"$scratch/after-failover"
check "promoted: the primary's first position reads every change the primary had, in order" \
    "$(wc -l <"$scratch/before-failover") $(md5sum <"$scratch/before-failover")" \
    "$(wc -l <"$scratch/after-failover") $(md5sum <"$scratch/after-failover")"
check "promoted: the primary's window position reads on" \
    "$(md5sum <"$scratch/primary.p1")" "$(changes "$standby" "$p1" | head -n 120 | md5sum)"
q "$standby" "INSERT INTO docs SELECT g, 'e' FROM generate_series(401, 425) g"
check "promoted: the primary's last position (timeline 1) reads exactly the 25 changes written since" \
    "25 e" "$(changes "$standby" "$p3" | awk '{ n++; v[$3]++ } END { for (k in v) print n, k }')"
check "promoted: the standby's position from before the promotion reads on" \
    "$(( $(wc -l <"$scratch/after-failover") - $(grep -c . "$scratch/standby.p0") + 25 ))" \
    "$(changes "$standby" "$s0" | wc -l)"
check "promoted: no change twice from the first position" "" \
    "$(changes "$standby" "$p0" | cut -d' ' -f1 | sort | uniq -d | head -3)"
out=$(try "$standby" "SELECT count(*) FROM changefeed.read('docs', '$p_lost')")
check "promoted: a position the old primary issued after the standby's last WAL fails with CF017" CF017 "${out%% *}"
check "promoted: the changes written after it on the old primary are not there" 0 \
    "$(q "$standby" "SELECT count(*) FROM docs WHERE v = 'lost'")"
check "promoted: no key file" none "$(no_key_file "$standby")"

stage_summary
