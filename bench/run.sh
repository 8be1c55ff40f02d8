#!/usr/bin/env bash
# All benchmarks in one run: write overhead, bulk statements, TPC-B, commit-to-handler latency and its
# floor, consumer throughput, read cost against the log's size, retention, the
# bridge into NATS JetStream, scale under a write rate, many ranges, reading
# from a standby, fan-out to many subscriptions, with and without row-level security.
# Writes bench/RESULTS.md and bench/results.png.
#   bash bench/run.sh            full sizes (about 80 minutes on 2 cores)
#   bash bench/run.sh --smoke    tiny sizes, checks the harness end to end (about 2 minutes)
# The clusters and the nats-server take ports BENCH_PORT_BASE .. +6 (default 55460) and live in
# BENCH_SCRATCH-* (default /tmp/changefeed-bench-*): set both to run two
# checkouts side by side.  PGBIN chooses the PostgreSQL (see test/cluster.sh);
# BENCH_OUT the folder of the builds and raw figures (default bench/out).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mode=${1:-full}
export BENCH_OUT=${BENCH_OUT:-$root/bench/out}
rm -rf "$BENCH_OUT"
mkdir -p "$BENCH_OUT"

bash test/install-deps.sh
# Peers, from Debian's packages.
need=()
for p in postgresql-15-pgq3 pgqd postgresql-15-wal2json gnuplot-nox; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

make -s && make -s install >/dev/null
# The benchmark programs use the installed client package, as a service would.
cmake -S . -B "$BENCH_OUT/client-build" -DCMAKE_BUILD_TYPE=Release -DCHANGEFEED_BUILD_TESTS=OFF \
    -DCHANGEFEED_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$BENCH_OUT/client-build" -j2 >/dev/null
cmake --install "$BENCH_OUT/client-build" --prefix "$BENCH_OUT/prefix" >/dev/null
cmake -S bench -B "$BENCH_OUT/bin" -DCMAKE_PREFIX_PATH="$BENCH_OUT/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BENCH_OUT/bin" -j2 >/dev/null
export LD_LIBRARY_PATH=$BENCH_OUT/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

if [ "$mode" = --smoke ]; then
    SYNC_MODES=on bash bench/write_overhead.sh 2000 1 1 2
    bash bench/bulk_writes.sh 5000 1
    bash bench/tpcb.sh 1 3 1 2
    bash bench/latency.sh 200 2 1 "$BENCH_OUT/bin"
    bash bench/latency.sh 2000 2 1 "$BENCH_OUT/bin" "floor changefeed"
    bash bench/log_size.sh 20000 2000 1 "$BENCH_OUT/bin"
    bash bench/scale.sh "$BENCH_OUT/bin" 1 3 2000 3 200 20
    bash bench/throughput.sh 5000 1 "$BENCH_OUT/bin"
    bash bench/throughput.sh 500 1 "$BENCH_OUT/bin" 1
    bash bench/throughput.sh 2000 1 "$BENCH_OUT/bin" 2000
    bash bench/open_xact.sh 2000 1 "$BENCH_OUT/bin"
    bash bench/rls_drain.sh 2000 1 "$BENCH_OUT/bin"
    bash bench/prune.sh 1 2000
    bash bench/bridge_nats.sh 2000 1 "$BENCH_OUT/bin"
    bash bench/ranges.sh "$BENCH_OUT/bin" 1 200 2 "8 64"
    bash bench/read_scale_out.sh 5000 1 "$BENCH_OUT/bin"
    bash bench/fanout.sh "$BENCH_OUT/bin" 2 4 40
    bash bench/rls_fanout.sh "$BENCH_OUT/bin" 2 4
    bash bench/report.sh "$BENCH_OUT/RESULTS.md" "$BENCH_OUT/results.png"
    # The smoke run checks that every part produced figures.
    for part in write bulk tpcb latency throughput open_xact rls_drain prune bridge ranges log_size scale readscale fanout rls_fanout; do
        grep -q "^$part	" "$BENCH_OUT/raw.tsv" || { echo "bench smoke: no $part figures" >&2; exit 1; }
    done
    echo "bench smoke: every part produced figures"
else
    bash bench/write_overhead.sh 100000 8 3 8
    bash bench/bulk_writes.sh 1000000 3
    bash bench/tpcb.sh 10 30 3 8
    bash bench/latency.sh 200 15 3 "$BENCH_OUT/bin"
    bash bench/latency.sh 2000 15 3 "$BENCH_OUT/bin"
    bash bench/log_size.sh 10000000 100000 3 "$BENCH_OUT/bin"
    bash bench/scale.sh "$BENCH_OUT/bin" 1 300 10000 300 1000 200
    bash bench/throughput.sh 1000000 1 "$BENCH_OUT/bin"
    bash bench/throughput.sh 200000 1 "$BENCH_OUT/bin" 1
    bash bench/throughput.sh 300000 1 "$BENCH_OUT/bin" 300000
    bash bench/open_xact.sh 200000 3 "$BENCH_OUT/bin"
    bash bench/rls_drain.sh 200000 3 "$BENCH_OUT/bin"
    bash bench/prune.sh 1 10000 100000 1000000
    bash bench/bridge_nats.sh 100000 3 "$BENCH_OUT/bin"
    bash bench/ranges.sh "$BENCH_OUT/bin" 3 5000 10 "16 256 1024"
    bash bench/read_scale_out.sh 500000 3 "$BENCH_OUT/bin"
    bash bench/fanout.sh "$BENCH_OUT/bin" 20 10 500
    bash bench/rls_fanout.sh "$BENCH_OUT/bin" 20 100
    bash bench/report.sh bench/RESULTS.md bench/results.png
fi
