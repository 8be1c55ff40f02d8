#!/usr/bin/env bash
# Runs every test of changefeed on throwaway local clusters:
#   1. pg_regress + isolation tests against a cluster with the library preloaded,
#   2. the same SQL tests (less the notifier's) against a cluster without preload,
#      and logical replication into enabled tables (test/replication.sh),
#   3. the client's GoogleTest suites (they start their own clusters),
#   4. the torture test in its short mode, and the benchmark harness on tiny sizes.
# Usage (as root on Debian 12): bash test/run-all.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash test/install-deps.sh

echo "== building and installing the extension"
make -s clean >/dev/null
make -s
make -s install >/dev/null

scratch=$(mktemp -d /tmp/changefeed-tests.XXXXXX)
chmod 755 "$scratch"
cleanup() {
    for c in "$scratch"/preload "$scratch"/plain; do
        [ -f "$c/data/postmaster.pid" ] && bash test/cluster.sh stop "$c" --immediate >/dev/null 2>&1 || true
    done
}
trap cleanup EXIT

failed=0
run_sql_tests() {  # $1 cluster dir, then make variables
    eval "$(bash test/cluster.sh env "$1")"
    shift
    if ! make -s installcheck "$@"; then
        failed=1
        cat regression.diffs output_iso/regression.diffs 2>/dev/null | head -200 || true
    fi
}

echo "== SQL tests, library preloaded"
# The worker's periodic maintain() would race the retention test; the notifier
# test turns it on for itself.
bash test/cluster.sh start "$scratch/preload" --port 55490 --fsync-off --conf "changefeed.maintain_interval = 0"
run_sql_tests "$scratch/preload"
bash test/cluster.sh stop "$scratch/preload"

echo "== SQL tests, library not preloaded (NOTIFY fallback)"
bash test/cluster.sh start "$scratch/plain" --port 55491 --fsync-off --no-preload
run_sql_tests "$scratch/plain" REGRESS_PRELOADED=
bash test/cluster.sh stop "$scratch/plain"

echo "== logical replication into enabled tables (own cluster, wal_level = logical)"
if ! bash test/replication.sh --port 55492; then failed=1; fi

if [ -f CMakeLists.txt ]; then
    echo "== client library and its tests"
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHANGEFEED_BUILD_TESTS=ON >/dev/null
    cmake --build build -j2
    if ! ctest --test-dir build --output-on-failure; then failed=1; fi

    echo "== torture test (short): concurrent writers, killed consumers, a checker"
    if ! bash test/torture/run.sh --short --build-dir build --no-build; then failed=1; fi

    echo "== benchmark harness, tiny sizes"
    if ! bash bench/run.sh --smoke >"$scratch/bench-smoke.log" 2>&1; then
        failed=1
        tail -40 "$scratch/bench-smoke.log"
    else
        tail -1 "$scratch/bench-smoke.log"
    fi
fi

if [ "$failed" -ne 0 ]; then
    echo "SOME TESTS FAILED"
    exit 1
fi
echo "ALL TESTS PASSED"
