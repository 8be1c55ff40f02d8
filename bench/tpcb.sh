#!/usr/bin/env bash
# Part 1c, TPC-B: pgbench's built-in transaction (three UPDATEs, a SELECT and
# an INSERT into the history table) at scale S with C clients,
# synchronous_commit on, each variant in a database of its own on one cluster
# and interleaved in rounds: no capture, changefeed on pgbench_accounts,
# pgbench_tellers and pgbench_branches (pgbench_history has no primary key),
# PgQ's trigger on the same three tables, and a wal2json slot decoding while
# the variant runs, with the tables at the default replica identity
# (wal2json) and at REPLICA IDENTITY FULL (wal2json_full: the old row in WAL,
# the peer of changefeed's images before and after).  Records TPS and the WAL
# each transaction wrote: all of it, and its records without the full-page
# images that the first write of a page after the round's CHECKPOINT adds
# (those depend on how many pages a run touches more than on the capture).
#   bash bench/tpcb.sh SCALE SECONDS ROUNDS CLIENTS
set -euo pipefail
source "$(dirname "$0")/lib.sh"
scale=${1:-10} secs=${2:-30} rounds=${3:-3} clients=${4:-8}
name=tpcb
start_bench_cluster "$name" 3 yes
conn_env "$name"
detect_peers
variants="none changefeed"
[ "$have_pgq" = yes ] && variants+=" pgq"
[ "$have_w2j" = yes ] && variants+=" wal2json wal2json_full"
tables="pgbench_accounts pgbench_tellers pgbench_branches"

for variant in $variants; do
    db=tpcb_$variant
    psql -qX -d postgres -c "CREATE DATABASE $db" >/dev/null
    "$PGBIN/pgbench" -q -i -s "$scale" -d "$db" >/dev/null 2>&1
    case $variant in
        changefeed)
            psql -qX -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION changefeed" >/dev/null
            for t in $tables; do psql -qXAt -v ON_ERROR_STOP=1 -d "$db" -c "SELECT changefeed.enable('$t')" >/dev/null; done ;;
        pgq)
            psql -qX -v ON_ERROR_STOP=1 -d "$db" -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('tpcb_q')" >/dev/null
            for t in $tables; do
                psql -qX -v ON_ERROR_STOP=1 -d "$db" -c "CREATE TRIGGER capture AFTER INSERT OR UPDATE OR DELETE ON $t
                    FOR EACH ROW EXECUTE PROCEDURE pgq.jsontriga('tpcb_q')" >/dev/null
            done ;;
        wal2json*)
            [ "$variant" = wal2json_full ] &&
                for t in $tables; do psql -qX -d "$db" -c "ALTER TABLE $t REPLICA IDENTITY FULL" >/dev/null; done
            psql -qXAt -d "$db" -c "SELECT 1 FROM pg_create_logical_replication_slot('tpcb_$variant', 'wal2json')" >/dev/null ;;
    esac
done

for round in $(seq 1 "$rounds"); do
    for variant in $variants; do
        db=tpcb_$variant
        psql -qX -d "$db" -c "VACUUM pgbench_branches, pgbench_tellers, pgbench_accounts" \
            -c "TRUNCATE pgbench_history" -c CHECKPOINT >/dev/null
        recv=
        if [ "${variant#wal2json}" != "$variant" ]; then
            # Decode only this variant's WAL, while it is written.
            slot_skip_to_now "tpcb_$variant" -d "$db"
            bench_background "$PGBIN/pg_recvlogical" --slot "tpcb_$variant" --start \
                -o format-version=2 -f /dev/null -d "host=$PGHOST port=$PGPORT user=postgres dbname=$db"
            recv=$bench_last_pid
            sleep 0.5
        fi
        wal_from=$(psql -qXAt -d "$db" -c "SELECT pg_current_wal_lsn()")
        out=$("$PGBIN/pgbench" -n -c "$clients" -j 2 -T "$secs" -d "$db" 2>/dev/null)
        wal_to=$(psql -qXAt -d "$db" -c "SELECT pg_current_wal_lsn()")
        [ -n "$recv" ] && bench_stop "$recv"
        tps=$(awk '/^tps/ {print $3}' <<<"$out")
        txs=$(awk '/number of transactions actually processed/ {split($NF, a, "/"); print a[1]}' <<<"$out")
        [ -n "$tps" ] && [ "${txs:-0}" -gt 0 ] || { echo "tpcb: pgbench gave no TPS for $variant" >&2; exit 1; }
        record tpcb "$variant" "scale $scale, $clients clients" "$round" "$tps" tps
        wal=$(psql -qXAt -d "$db" -c "SELECT round(pg_wal_lsn_diff('$wal_to', '$wal_from') / $txs)")
        # pg_waldump's total of the records' own bytes, full-page images apart.
        records=$("$PGBIN/pg_waldump" --stats=record -p "$(bench_dir "$name")/data/pg_wal" -s "$wal_from" -e "$wal_to" \
            2>/dev/null | awk -v n="$txs" '/^Total/ {printf "%.0f\n", $3 / n}')
        record tpcb_wal "$variant" "all" "$round" "$wal" B
        record tpcb_wal "$variant" "records" "$round" "${records:-0}" B
        echo "round $round  tpcb  $variant  $tps tps  $wal B of WAL a transaction (${records:-?} B without page images)"
        # The capture's own log and queue grow with every round: empty them
        # outside the timed runs so rounds stay alike.
        case $variant in
            changefeed)
                # Three changes per transaction, or the capture was not measured.
                n=$(psql -qXAt -d "$db" -c "SELECT count(*) FROM changefeed.log")
                [ "$n" -gt 0 ] || { echo "tpcb: changefeed captured nothing" >&2; exit 1; }
                psql -qX -d "$db" -c "TRUNCATE changefeed.log" >/dev/null 2>&1 || true ;;
            pgq) psql -qX -d "$db" -c "SELECT pgq.maint_rotate_tables_step1('tpcb_q')" >/dev/null 2>&1 || true ;;
        esac
    done
done
