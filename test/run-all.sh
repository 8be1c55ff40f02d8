#!/usr/bin/env bash
# Runs every test of changefeed on throwaway local clusters:
#   0. an incremental build after touching a header rebuilds its dependants,
#      the SQLSTATE registry agrees with the sources and the README, the
#      README's Measured section with bench/RESULTS.md, every
#      runbook named exists, the
#      position codec cannot include PostgreSQL's headers, every C++ file
#      matches .clang-format (test/stages/format.sh), and released
#      install scripts are unchanged with an upgrade path to this version, and
#      docs/options.md lists every option, and META.json and debian/changelog
#      carry the project's version (test/stages/package_meta.sh),
#   1. pg_regress + isolation tests against a cluster with the library preloaded,
#   2. the same SQL tests (less the notifier's) against a cluster without preload,
#      and logical replication into enabled tables (test/stages/replication.sh),
#      and the SQL tests again on PostgreSQL 17 and 18, each in a Debian root
#      (trixie, forky) cached in /var/cache/changefeed-matrix, with the client
#      built there on libpqxx 7.10 and 8.0, three of its suites and the
#      upgrade test, and on 17 the Citus stage (test/stages/matrix.sh), and the Debian packages built for
#      both releases, installed on a minimal root and the demo run against
#      them (test/stages/packages.sh; its build roots and ccache are cached there too),
#   3. PostgreSQL's own regression suite with and without the extension, a
#      dump and restore round trip of a database using it, and an upgrade from
#      the last release (test/stages/upgrade.sh; it builds the client's processor
#      runner, which step 4 reuses), reads on a hot standby and a promotion
#      (test/stages/standby_read.sh), a point-in-time restore (test/stages/pitr.sh), the same
#      through pgBackRest with a processor resuming (test/stages/pgbackrest.sh), and the
#      Python example of the SQL read protocol (test/stages/python_example.sh),
#      pg_partman retention run by pg_cron on an enabled table (test/stages/partman.sh),
#      pg_repack of an enabled table under writes (test/stages/repack.sh),
#      the docs' SQL blocks marked to run as written (test/stages/docs_sql.sh),
#   4. the client's GoogleTest suites (they start their own clusters), and the
#      lifetime-sensitive ones again under AddressSanitizer and UBSan (test/stages/asan.sh),
#   5. the torture test in its short mode, the consumer fault stage
#      (test/consumer_faults/run.sh), the consumers, the CLI and 100 processors
#      through PgBouncer in session and transaction mode (test/stages/pgbouncer.sh),
#      a Citus cluster (Citus built from ../shared/vendor and cached): a
#      distributed table captured on every shard placement and read as one
#      feed by a processor on the coordinator while shards move, split, a
#      worker restarts and one is added (test/stages/citus.sh),
#      a processor through a Patroni switchover, failover and pg_rewind (test/stages/patroni.sh),
#      the shipped Prometheus alerts fired and resolved (test/stages/prometheus.sh),
#      and the benchmark harness on tiny sizes.
# Usage (as root on Debian 12): bash test/run-all.sh
# Ends with `run-all: N passed, M failed`, counting the stages above.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

bash test/install-deps.sh

# The tests' servers listen on loopback ports 55400-56199, which lie in
# Linux's ephemeral range: a client connection of an earlier stage that took
# one as its local port would make a server's bind fail.  Reserved for the
# run (where /proc/sys is writable), given back at the end.
reserved=/proc/sys/net/ipv4/ip_local_reserved_ports
reserved_before=$(cat "$reserved" 2>/dev/null || true)
if [ -w "$reserved" ] && echo "${reserved_before:+$reserved_before,}55400-56199" >"$reserved" 2>/dev/null; then
    echo "== loopback ports 55400-56199 kept out of the ephemeral range for the run"
else
    reserved=
fi

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
    [ -z "$reserved" ] || echo "$reserved_before" >"$reserved" 2>/dev/null || true
}
trap cleanup EXIT

passed=0 failed=0 failed_stages=()
# stage NAME COMMAND...: runs one stage and counts its outcome.
stage() {
    local name=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failed_stages+=("$name")
    fi
}
run_sql_tests() {  # $1 cluster dir, then make variables
    eval "$(bash test/cluster.sh env "$1")"
    shift
    if ! make -s installcheck "$@"; then
        cat regression.diffs output_iso/regression.diffs 2>/dev/null | head -200 || true
        return 1
    fi
}
bench_smoke() {
    if ! bash bench/run.sh --smoke >"$scratch/bench-smoke.log" 2>&1; then
        tail -40 "$scratch/bench-smoke.log"
        return 1
    fi
    tail -1 "$scratch/bench-smoke.log"
}

echo "== incremental build: touching a header rebuilds its dependants"
stage "incremental build" bash test/stages/incremental_build.sh
echo "== SQLSTATE registry: every code raised is listed, the README agrees"
stage "SQLSTATE registry" bash test/stages/sqlstates.sh
echo "== the README's Measured section agrees with bench/RESULTS.md"
stage "measured figures" bash test/stages/measured.sh
echo "== every runbook the code names exists"
stage "runbooks" bash test/stages/runbooks.sh
echo "== the position codec keeps PostgreSQL's headers out"
stage "codec guard" bash test/stages/codec_guard.sh
echo "== every C++ file is formatted as .clang-format says"
stage "format" bash test/stages/format.sh
echo "== released install scripts are frozen, each release upgrades to this version"
stage "releases" bash test/stages/releases.sh

echo "== docs/options.md lists every option of the SQL functions and the client"
stage "options reference" bash test/stages/options_doc.sh

echo "== META.json and debian/changelog agree with the project's version"
stage "package metadata" bash test/stages/package_meta.sh

echo "== SQL tests, library preloaded"
# The worker's periodic maintain() would race the retention test; the notifier
# test turns it on for itself.
bash test/cluster.sh start "$scratch/preload" --port 55490 --fsync-off --conf "changefeed.maintain_interval = 0"
stage "SQL tests, library preloaded" run_sql_tests "$scratch/preload"
bash test/cluster.sh stop "$scratch/preload"

echo "== SQL tests, library not preloaded (NOTIFY fallback)"
bash test/cluster.sh start "$scratch/plain" --port 55491 --fsync-off --no-preload
stage "SQL tests, library not preloaded" run_sql_tests "$scratch/plain" REGRESS_PRELOADED= ISOLATION_PRELOADED=
bash test/cluster.sh stop "$scratch/plain"

echo "== PostgreSQL 17 and 18: the SQL tests in Debian trixie and forky roots"
stage "PostgreSQL 17 and 18" bash test/stages/matrix.sh --port-base 55470
echo "== Debian packages: built for trixie and forky, installed on minimal roots, the demo against them"
stage "Debian packages" bash test/stages/packages.sh --suites "trixie forky" --port 55498

echo "== logical replication into enabled tables (own cluster, wal_level = logical)"
stage "logical replication" bash test/stages/replication.sh --port 55496
echo "== PostgreSQL's own regression suite, with and without the extension"
stage "PostgreSQL's regression suite" bash test/stages/core-regress.sh --port 55492
echo "== dump and restore of a database using the extension"
stage "dump and restore" bash test/stages/dump_restore.sh --port 55494
echo "== upgrade from the last release: same objects as a fresh install, consumers read on"
stage "upgrade" bash test/stages/upgrade.sh --port 55488 --build-dir build
echo "== a hot standby made before CREATE EXTENSION reads the feed, and a promotion keeps every position"
stage "standby reads and promotion" bash test/stages/standby_read.sh --port 55470
echo "== a point-in-time restore refuses the abandoned branch's positions (CF017) and skips nothing"
stage "point-in-time restore" bash test/stages/pitr.sh --port 55474
echo "== pgBackRest: a full backup, a restore to a point in time elsewhere, processors resume there"
stage "pgBackRest" bash test/stages/pgbackrest.sh --port 55462 --build-dir build

echo "== the Python example of the SQL read protocol (psycopg)"
stage "Python read-protocol example" bash test/stages/python_example.sh --port 55486
echo "== pg_partman retention from a pg_cron job: expired deletes, the other partman table premade"
stage "pg_partman and pg_cron" bash test/stages/partman.sh --port 55484
echo "== pg_repack of an enabled table under writes: every write captured once, none invented"
stage "pg_repack" bash test/stages/repack.sh --port 55480
echo "== the docs' SQL blocks marked to run as written, as the roles they name"
stage "docs' SQL" bash test/stages/docs_sql.sh --port 55482

if [ -f CMakeLists.txt ]; then
    echo "== client library and its tests"
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHANGEFEED_BUILD_TESTS=ON >/dev/null
    cmake --build build -j2
    stage "client tests" ctest --test-dir build --output-on-failure

    echo "== client tests under AddressSanitizer and UBSan (own build dir and ports)"
    stage "client tests under AddressSanitizer and UBSan" bash test/stages/asan.sh --build-dir build-asan --port-base 55600

    echo "== torture test (short): concurrent writers, killed consumers, a checker"
    stage "torture test" bash test/torture/run.sh --short --build-dir build --no-build

    echo "== consumer fault stage: transactional and projector consumers under kills, freezes, terminated backends"
    stage "consumer fault stage" bash test/consumer_faults/run.sh --short --port 55478 --build-dir build --no-build

    echo "== PgBouncer 1.18 in session and transaction mode: every handler shape, the CLI, 100 processors"
    stage "PgBouncer" bash test/stages/pgbouncer.sh --port 55476 --build-dir build --no-build

    echo "== Citus: every shard placement captured, one feed on the coordinator, across moves, a split, a restart"
    stage "Citus" bash test/stages/citus.sh --port 55560 --build-dir build --no-build

    echo "== Patroni with etcd: switchover, failover, the old leader rewound; processors run on"
    stage "Patroni" bash test/stages/patroni.sh --port 55454 --build-dir build --no-build

    echo "== the shipped alerts: promtool, then a real Prometheus, postgres_exporter and a service"
    stage "Prometheus alerts" bash test/stages/prometheus.sh --port 55466 --build-dir build --no-build

    echo "== benchmark harness, tiny sizes"
    stage "benchmark harness" bench_smoke
fi

echo
if [ "$failed" -ne 0 ]; then
    echo "SOME TESTS FAILED: ${failed_stages[*]}"
else
    echo "ALL TESTS PASSED"
fi
# The last word, after the stages' own summaries (dump_restore.sh prints one).
echo "run-all: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
