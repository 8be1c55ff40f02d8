# Shared helpers of the benchmark scripts (sourced, not run).
# Results are appended to $BENCH_OUT/raw.tsv as: part  variant  case  round  value  unit
BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_OUT=${BENCH_OUT:-$BENCH_ROOT/bench/out}
PGBIN=/usr/lib/postgresql/15/bin
mkdir -p "$BENCH_OUT"

record() {  # part variant case round value unit
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$BENCH_OUT/raw.tsv"
}

# Starts a benchmark cluster: fsync on, logical decoding allowed for wal2json.
start_bench_cluster() {  # dir port preload(yes|no)
    local preload_opt=()
    [ "$3" = no ] && preload_opt=(--no-preload)
    bash "$BENCH_ROOT/test/cluster.sh" start "$1" --port "$2" "${preload_opt[@]}" \
        --conf "shared_buffers = 1GB" --conf "max_wal_size = 8GB" --conf "checkpoint_timeout = 30min" \
        --conf "wal_level = logical" --conf "max_replication_slots = 8" --conf "max_wal_senders = 8" \
        --conf "output_plugin_libraries = 'wal2json'" --conf "changefeed.maintain_interval = 0"
}

stop_bench_cluster() {
    bash "$BENCH_ROOT/test/cluster.sh" stop "$1" >/dev/null 2>&1 || true
}

conn_env() {  # dir -> exports PGHOST/PGPORT/PGUSER/PGDATABASE
    eval "$(bash "$BENCH_ROOT/test/cluster.sh" env "$1")"
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}'; }
