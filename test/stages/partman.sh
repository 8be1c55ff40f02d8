#!/usr/bin/env bash
# pg_partman retention on an enabled table, run by pg_cron as the tables'
# owner (no superuser), beside an unrelated partman table.
#   A cluster preloads changefeed and pg_cron.  Role `app` (a changefeed
#   reader, granted pg_partman's schema as its docs say) owns both tables,
#   enables one and schedules the job.  `events` is partitioned by day
#   and managed by pg_partman 4.7 with a retention of 3 days; it is enabled
#   with partition_drops => 'expire' and holds rows in days that retention
#   drops, and is asked to premake more partitions once enabled (the
#   owner creates partitions of an enabled table).  `metrics`, another
#   partman table, is asked to premake more partitions.  A pg_cron job runs partman.run_maintenance() (pg_cron 1.4
#   schedules by the minute: the stage waits for the next one).
# Checked: the job succeeds through pg_cron; the partitions of events older
# than the retention are gone (detached and dropped by partman); metrics got
# its partitions premade; a consumer reading from a position before the
# maintenance sees one delete with ttl_expired per row of the dropped
# partitions and nothing else, with no CF006; verify() finds capture intact.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/partman.sh [--port N] [--keep]
# Installs postgresql-15-partman and postgresql-15-cron if missing (into the
# PostgreSQL of PG_CONFIG too when that is not the system's).
# Prints `N passed, M failed` last; exits 1 when a check failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

source test/support/checks.sh
stage_options partman.sh 55484 "$@"

debian_extensions postgresql-15-partman postgresql-15-cron

stage_scratch partman
db=$scratch/db
trap 'stage_cleanup "$db"' EXIT

q() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$db" -p "$port" -U postgres -d postgres -c "$1"; }
# As the tables' owner, who is no superuser.
qa() { "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$db" -p "$port" -U app -d postgres -c "$1"; }
try() { psql_try -h "$db" -p "$port" -U postgres -d postgres -c "$1"; }

bash test/cluster.sh start "$db" --port "$port" --fsync-off --conf "changefeed.maintain_interval = 0" \
    --conf "shared_preload_libraries = 'changefeed,pg_cron'" --conf "cron.database_name = 'postgres'" \
    --conf "cron.use_background_workers = on" --conf "max_worker_processes = 32"
q "CREATE EXTENSION changefeed"
q "CREATE EXTENSION pg_cron"
q "CREATE SCHEMA partman"
q "CREATE EXTENSION pg_partman SCHEMA partman"
q "CREATE ROLE app LOGIN IN ROLE changefeed_reader"
q "GRANT CREATE ON SCHEMA public TO app"
q "GRANT ALL ON SCHEMA partman TO app; GRANT ALL ON ALL TABLES IN SCHEMA partman TO app;
   GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA partman TO app; GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA partman TO app"
q "GRANT USAGE ON SCHEMA cron TO app"

echo "== two partman tables: events (retention 3 days, enabled) and metrics"
qa "CREATE TABLE events (at timestamptz NOT NULL, id bigint NOT NULL, body text, PRIMARY KEY (at, id))
     PARTITION BY RANGE (at)"
qa "SELECT partman.create_parent('public.events', 'at', 'native', 'daily', p_premake := 3,
                                p_start_partition := (current_date - 8)::text)" >/dev/null
qa "UPDATE partman.part_config SET retention = '3 days', retention_keep_table = false
    WHERE parent_table = 'public.events'"
qa "CREATE TABLE metrics (at timestamptz NOT NULL, v int) PARTITION BY RANGE (at)"
qa "SELECT partman.create_parent('public.metrics', 'at', 'native', 'daily', p_premake := 2)" >/dev/null
qa "UPDATE partman.part_config SET premake = 6 WHERE parent_table = 'public.metrics'"
qa "INSERT INTO metrics VALUES (now(), 1)"   # partman premakes ahead of the newest data
qa "SELECT changefeed.enable('events', partition_drops => 'expire')" >/dev/null
# Maintenance also makes partitions of the enabled table, as its owner.
qa "UPDATE partman.part_config SET premake = 5 WHERE parent_table = 'public.events'"
# Ten rows per day from eight days ago to today (the current day's time of day).
qa "INSERT INTO events SELECT date_trunc('day', now()) - d * interval '1 day' + interval '1 hour', d * 100 + i, 'row'
     FROM generate_series(0, 8) d, generate_series(1, 10) i"
future() { q "SELECT count(*) FROM pg_partition_tree('$1') t JOIN pg_class c ON c.oid = t.relid
               WHERE t.level = 1 AND c.relname ~ '_p[0-9]{4}_[0-9]{2}_[0-9]{2}$'
                 AND to_date(right(c.relname, 10), 'YYYY_MM_DD') > current_date"; }
old_rows=$(q "SELECT count(*) FROM events WHERE at < date_trunc('day', now()) - interval '3 days'")
before=$(q "SELECT changefeed.current_position()")
metrics_before=$(future metrics)
events_before=$(future events)

echo "== run_maintenance() from a pg_cron job (pg_cron 1.4 runs jobs at the next minute)"
qa "SELECT cron.schedule('partman maintenance', '* * * * *', 'SELECT partman.run_maintenance()')" >/dev/null
runs=0
for _ in $(seq 1 750); do
    runs=$(q "SELECT count(*) FROM cron.job_run_details WHERE status IN ('succeeded', 'failed')")
    [ "$runs" -ge 1 ] && break
    sleep 0.1
done
qa "SELECT cron.unschedule('partman maintenance')" >/dev/null
check "the job ran as app" "app" "$(q "SELECT string_agg(DISTINCT username, ',') FROM cron.job_run_details")"
check "the pg_cron job ran run_maintenance()" yes "$([ "$runs" -ge 1 ] && echo yes || echo no)"
check "every run succeeded" "" "$(q "SELECT status || ': ' || coalesce(return_message, '')
                                       FROM cron.job_run_details WHERE status <> 'succeeded'
                                        AND status IN ('failed') ORDER BY runid")"

old=$(q "SELECT count(*) FROM pg_partition_tree('events') t JOIN pg_class c ON c.oid = t.relid
          WHERE t.level = 1 AND c.relname ~ '_p[0-9]{4}_[0-9]{2}_[0-9]{2}$'
            AND to_date(right(c.relname, 10), 'YYYY_MM_DD') < current_date - 3")
check "events: no partition older than the retention is left" 0 "$old"
check "events: the dropped partitions' tables are gone too" 0 \
    "$(q "SELECT count(*) FROM pg_class WHERE relname ~ '^events_p' AND relkind = 'r'
            AND NOT relispartition")"
check "metrics: its partitions are premade (2 before, 6 after)" "2 6" "$metrics_before $(future metrics)"
check "events: made by app after enabling (3 ahead before, 5 after)" "3 5" "$events_before $(future events)"
check "the rows of days retention dropped were there" 50 "$old_rows"

read_out=$(try "SELECT count(*) FILTER (WHERE operation = 'delete' AND ttl_expired), count(*)
                  FROM changefeed.read('events', '$before', max_changes => 100000)")
check "a consumer sees one expired delete per dropped row, and nothing else (no CF006)" "OK $old_rows|$old_rows" "$read_out"
check "the expired deletes carry the previous image" "$old_rows" \
    "$(q "SELECT count(*) FROM changefeed.read('events', '$before', max_changes => 100000)
           WHERE previous ->> 'body' = 'row'")"
check "capture is intact" "t" "$(q "SELECT intact FROM changefeed.verify() WHERE table_name = 'events'::regclass")"
check "no horizon (no history lost)" 0 "$(q "SELECT count(*) FROM changefeed.horizon")"

echo "== a write after maintenance is captured"
qa "INSERT INTO events VALUES (now(), 1000000, 'after')"
check "the new row is read as a create" "create" \
    "$(q "SELECT string_agg(operation, ',') FROM changefeed.read('events', '$before', max_changes => 100000)
           WHERE doc_id LIKE '%1000000%'")"

stage_summary
