# Shared helpers of the benchmark scripts (sourced, not run).
# Results are appended to $BENCH_OUT/raw.tsv as: part  variant  case  round  value  unit
BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_OUT=${BENCH_OUT:-$BENCH_ROOT/bench/out}
# The PostgreSQL to run (test/cluster.sh honours the same variable).
export PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
# Where the benchmark clusters live and the first of the seven ports they and
# the nats-server take (BENCH_PORT_BASE .. +6), so that two checkouts can run side by side.
BENCH_SCRATCH=${BENCH_SCRATCH:-/tmp/changefeed-bench}
BENCH_PORT_BASE=${BENCH_PORT_BASE:-55460}
mkdir -p "$BENCH_OUT"

# What bench_cleanup stops when the script exits: clusters and background
# processes, each by the directory or pid recorded when it started.
bench_clusters=()
bench_pids=()
bench_cleanup() {
    local pid dir
    for pid in "${bench_pids[@]}"; do bench_stop "$pid"; done
    for dir in "${bench_clusters[@]}"; do stop_bench_cluster "$dir"; done
}
trap bench_cleanup EXIT

# Runs a command in the background in a process group of its own, recorded
# for bench_cleanup; its pid is in $bench_last_pid.  Redirect its output on
# the call: bench_background cmd args >file
bench_background() {
    setsid -w "$@" &
    bench_last_pid=$!
    bench_pids+=("$bench_last_pid")
}

# Waits for a process started by bench_background to end by itself.
bench_wait() {
    local pid=$1 kept=() p rc=0
    wait "$pid" || rc=$?
    for p in "${bench_pids[@]}"; do [ "$p" = "$pid" ] || kept+=("$p"); done
    bench_pids=("${kept[@]}")
    return "$rc"
}

# Stops a process started by bench_background, with everything it started
# (its process group), and waits for it.
bench_stop() {
    kill -TERM -- "-$1" 2>/dev/null || kill -TERM "$1" 2>/dev/null || true
    bench_wait "$1" 2>/dev/null || true
}

# Moves logical slot SLOT to the current end of WAL, so that a run decodes
# only its own WAL.  The walsender of the previous run may still hold the slot
# for a moment after its pg_recvlogical exits: wait for it to let go.
slot_skip_to_now() {  # slot [psql options...]
    local slot=$1
    shift
    for _ in $(seq 1 100); do
        [ "$(psql -qXAt "$@" -c "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'")" = f ] && break
        sleep 0.1
    done
    psql -qXAt "$@" -c "SELECT 1 FROM pg_replication_slot_advance('$slot', pg_current_wal_lsn())" >/dev/null
}

record() {  # part variant case round value unit
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$BENCH_OUT/raw.tsv"
}

bench_dir() { echo "$BENCH_SCRATCH-$1"; }  # name -> the cluster's directory

# Starts benchmark cluster NAME on port BENCH_PORT_BASE + OFFSET, stopped at
# exit: fsync on, logical decoding allowed for wal2json; BENCH_CONF, when set,
# is one more postgresql.conf line (e.g. "changefeed.notify_interval = 0").
start_bench_cluster() {  # name offset preload(yes|no)
    local dir port preload_opt=()
    dir=$(bench_dir "$1")
    port=$((BENCH_PORT_BASE + $2))
    [ "$3" = no ] && preload_opt=(--no-preload)
    bench_clusters+=("$dir")
    bash "$BENCH_ROOT/test/cluster.sh" start "$dir" --port "$port" "${preload_opt[@]}" \
        --conf "shared_buffers = 1GB" --conf "max_wal_size = 8GB" --conf "checkpoint_timeout = 30min" \
        --conf "wal_level = logical" --conf "max_replication_slots = 8" --conf "max_wal_senders = 8" \
        --conf "output_plugin_libraries = 'wal2json'" --conf "changefeed.maintain_interval = 0" \
        ${BENCH_CONF:+--conf "$BENCH_CONF"}
}

stop_bench_cluster() {
    bash "$BENCH_ROOT/test/cluster.sh" stop "$1" >/dev/null 2>&1 || true
}

conn_env() {  # name -> exports PGHOST/PGPORT/PGUSER/PGDATABASE
    eval "$(bash "$BENCH_ROOT/test/cluster.sh" env "$(bench_dir "$1")")"
}

# The libpq connection string of the cluster conn_env last chose.
bench_conninfo() { echo "host=$PGHOST port=$PGPORT user=postgres dbname=postgres"; }

# backlog_sql TABLE N TX: the SQL that writes documents 1 .. N into TABLE (id
# bigint, doc jsonb) in transactions of TX rows, for a heredoc.
backlog_sql() {
    cat <<SQL
DO \$\$
BEGIN
    FOR t IN 0 .. ($2 - 1) / $3 LOOP
        INSERT INTO $1 SELECT g, jsonb_build_object('name', 'user ' || g, 'n', g, 'tags', jsonb_build_array('a', 'b'))
          FROM generate_series(t * $3 + 1, least(t * $3 + $3, $2)) g;
        COMMIT;
    END LOOP;
END
\$\$;
SQL
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }

# Sets have_pgq and have_w2j to yes or no: whether the peers' Debian packages
# are installed for $PGBIN's PostgreSQL.
detect_peers() {
    have_pgq=no have_w2j=no
    [ -f "$("$PGBIN/pg_config" --sharedir)/extension/pgq.control" ] && have_pgq=yes
    [ -f "$("$PGBIN/pg_config" --pkglibdir)/wal2json.so" ] && have_w2j=yes
    return 0
}
