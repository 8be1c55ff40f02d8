# What the torture test runs beside its writers: migrations of public.docs
# under load (ADD, RENAME, DROP COLUMN, each a schema version in the feed),
# and writers of public.zoned, whose key is a timestamptz, one session per
# TimeZone and DateStyle, each deleting rows the others created (so every
# delete's document id must be its create's whatever the session's settings).
# Sourced by run.sh; both stop when the writers' process `$1` is gone.

# migrate_under_load WRITER_PID: one step at a time, a second apart, retried
# when its lock is not granted in time; each step done is a line of
# $work/migrations.
migrate_under_load() {
    local writer=$1 k=0 step
    : >"$work/migrations"
    while kill -0 "$writer" 2>/dev/null; do
        k=$((k + 1))
        for step in "ADD COLUMN mig_$k text DEFAULT 'm$k'" "RENAME COLUMN mig_$k TO mig_${k}_renamed" \
                    "DROP COLUMN mig_${k}_renamed"; do
            until psql -qXAt -c "SET lock_timeout = '2s'" -c "ALTER TABLE public.docs $step" >/dev/null 2>&1; do
                kill -0 "$writer" 2>/dev/null || return 0
                sleep 0.2
            done
            echo "$step" >>"$work/migrations"
            sleep 1
        done
    done
}

# zone_writers WRITER_PID: four sessions at a time, each under its own
# TimeZone, DateStyle and float and interval settings (what a client's
# environment sets), 50 inserts and 50 deletes of another zone's rows each.
zone_writers() {
    local writer=$1
    local zones=("Asia/Kathmandu|SQL, DMY" "America/St_Johns|German" "Pacific/Chatham|Postgres, MDY" "UTC|ISO, YMD")
    local z
    while kill -0 "$writer" 2>/dev/null; do
        for z in "${zones[@]}"; do
            PGTZ=${z%%|*} PGDATESTYLE=${z#*|} PGOPTIONS="-c extra_float_digits=0 -c IntervalStyle=sql_standard" \
                psql -qX -v ON_ERROR_STOP=1 -f test/torture/zone_writer.sql >>"$work/zones.log" 2>&1 &
        done
        wait
    done
}
