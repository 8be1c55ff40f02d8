#!/usr/bin/env bash
# The extension on the newer PostgreSQL majors: in a Debian trixie root
# (PostgreSQL 17) and a Debian forky root (PostgreSQL 18), each made with
# debootstrap into a cache folder outside the checkout (made when missing,
# reused when present), a copy of the checkout is built and installed, a
# cluster with the library preloaded is started as the root's postgres user
# (test/cluster.sh) and `make installcheck` runs the pg_regress and isolation
# suites.  In each root the client is also built against that root's libpqxx
# (trixie 7.10, forky 8.0), Boost.JSON and GoogleTest, and a representative
# part of its suites runs there (processors, leases, projections), then
# test/stages/upgrade.sh (the last release updated in place); the client's build
# folder stays in the root, so a later run rebuilds only what changed.  On
# PostgreSQL 17, test/stages/citus.sh runs there too, Citus built in the root
# from ../shared/vendor and cached with it.
#
#   test/stages/matrix.sh [--legs "17 18"] [--cache DIR] [--port-base N] [--no-client]
#
# Run as root. Prints each leg's timings; exits non-zero when a leg fails.
# Mounts and servers are cleaned up on every exit.
set -euo pipefail
cd "$(dirname "$0")/../.."
checkout=$(pwd)

source test/support/stage.sh
legs="17 18"
cache=${CHANGEFEED_MATRIX_CACHE:-/var/cache/changefeed-matrix}
port_base=55470
client=yes
# The PostgreSQL majors whose root also builds and tests the client, and the
# suites run there.
client_legs="17 18"
client_suites='^(lease_test|processor_errors_test|projection_test)$'
client_packages=(libpqxx-dev libboost-json-dev libgtest-dev cmake pkg-config)
# The PostgreSQL majors whose root runs the Citus stage (Citus 13.2 builds
# against 15 to 17; the host runs 15; on 18, whose headers say it has
# libcurl, Citus 14.0's build wants curl's headers too: not run yet), and
# what Citus needs to build there.
citus_legs="17"
citus_packages=(liblz4-dev libzstd-dev libkrb5-dev libicu-dev python3-psycopg)
parse_options matrix.sh --legs=legs --cache=cache --port-base=port_base --no-client=client: -- "$@"

# suite_of, in_root, apt_in, make_root, mount_in, umount_in, cleanup (on exit).
. test/support/debian_roots.sh
trap cleanup EXIT
trap "exit 130" INT TERM

# leg_steps MAJOR PORT: builds, installs and tests the extension in the root;
# sets t_root, t_build and t_tests (seconds) as it goes.
leg_steps() {
    local major=$1 port=$2 suite root pgbin t rc=0
    suite=$(suite_of "$major")
    root=$cache/$suite
    pgbin=/usr/lib/postgresql/$major/bin
    t=$(date +%s)
    make_root "$major" || return 1
    t_root=$(($(date +%s) - t)) t=$(date +%s)
    # A fresh copy of the checkout (without build output) at /src in the root.
    rm -rf --one-file-system "$root/src"
    mkdir -p "$root/src"
    tar -C "$checkout" --exclude-vcs --exclude='./build*' --exclude='./results' --exclude='./output_iso' \
        --exclude='./extension/*.o' --exclude='./extension/*.d' --exclude='./extension/*/*.o' --exclude='./extension/*/*.d' --exclude='./*.so' -cf - . \
        | tar -C "$root/src" -xf -
    mount_in "$root"
    echo "matrix: PostgreSQL $major ($suite): building and installing the extension"
    if ! in_root "$root" bash -c "cd /src && make -s clean >/dev/null && make -s PG_CONFIG=$pgbin/pg_config \
            && make -s install PG_CONFIG=$pgbin/pg_config >/dev/null" >"$root/build.log" 2>&1; then
        grep -E 'error|Error' "$root/build.log" | head -40 || tail -20 "$root/build.log"
        return 1
    fi
    t_build=$(($(date +%s) - t)) t=$(date +%s)
    local c=/tmp/matrix-pg$major
    clusters+=("$root|$c|$pgbin")
    in_root "$root" PGBIN="$pgbin" bash /src/test/cluster.sh start "$c" --port "$port" --fsync-off \
        --conf "changefeed.maintain_interval = 0" || return 1
    echo "matrix: PostgreSQL $major ($suite): make installcheck (pg_regress + isolation)"
    in_root "$root" bash -c "cd /src && eval \"\$(bash test/cluster.sh env $c)\" \
        && make -s installcheck PG_CONFIG=$pgbin/pg_config" || rc=1
    if [ $rc -ne 0 ]; then
        cat "$root/src/regression.diffs" "$root/src/output_iso/regression.diffs" 2>/dev/null | head -200 || true
    fi
    in_root "$root" PGBIN="$pgbin" bash /src/test/cluster.sh stop "$c" || rc=1
    t_tests=$(($(date +%s) - t)) t=$(date +%s)
    if [ -n "$client" ] && [[ " $client_legs " == *" $major "* ]]; then
        client_steps "$root" "$pgbin" $((port + 100)) || rc=1
        t_client=$(($(date +%s) - t))
    fi
    umount_in "$root"
    return $rc
}

# root_packages ROOT LOG PACKAGE...: the packages installed in the root when
# missing (apt's output in ROOT/LOG).
root_packages() {
    local root=$1 log=$2 missing=() p
    shift 2
    for p in "$@"; do
        in_root "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$p")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    echo "matrix: installing ${missing[*]} in $root"
    { apt_in "$root" update && apt_in "$root" install -y --no-install-recommends "${missing[@]}"; } \
        >"$root/$log" 2>&1 || { tail -20 "$root/$log"; return 1; }
}

# client_steps ROOT PGBIN PORT_BASE: builds the client in the root and runs
# $client_suites there (their clusters take ports from PORT_BASE up).
client_steps() {
    local root=$1 pgbin=$2 ports=$3
    root_packages "$root" client-apt.log "${client_packages[@]}" || return 1
    echo "matrix: building the client in $root and running its suites"
    local build=/var/tmp/changefeed-client-build
    if ! in_root "$root" bash -c "cmake -S /src -B $build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
            -DCHANGEFEED_BUILD_TESTS=ON -DCHANGEFEED_TEST_PORT_BASE=$ports >/dev/null \
            && cmake --build $build -j2 --target lease_test processor_errors_test projection_test" \
            >"$root/client-build.log" 2>&1; then
        grep -E 'error' "$root/client-build.log" | head -40 || tail -20 "$root/client-build.log"
        return 1
    fi
    in_root "$root" PGBIN="$pgbin" ctest --test-dir "$build" -R "$client_suites" --output-on-failure \
        >"$root/client-tests.log" 2>&1 || { tail -60 "$root/client-tests.log"; return 1; }
    grep -E 'tests passed|tests failed' "$root/client-tests.log"
    # The upgrade from the last release (it needs the client's processor runner).
    in_root "$root" PGBIN="$pgbin" bash /src/test/stages/upgrade.sh --port $((ports + 80)) --build-dir "$build" --no-build \
        >"$root/upgrade.log" 2>&1 || { grep -vE '^ok' "$root/upgrade.log" | tail -40; return 1; }
    echo "matrix: upgrade from the last release: $(tail -1 "$root/upgrade.log")"
    if [[ " $citus_legs " == *" $(basename "$(dirname "$pgbin")") "* ]]; then
        citus_steps "$root" "$pgbin" "$build" $((ports + 20)) || return 1
    fi
}

# citus_steps ROOT PGBIN BUILD PORT: test/stages/citus.sh in the root, Citus
# built there from the vendored sources (copied to /shared/vendor, beside /src).
citus_steps() {
    local root=$1 pgbin=$2 build=$3 port=$4 vendor
    root_packages "$root" citus-apt.log "${citus_packages[@]}" || return 1
    vendor=$(source test/support/citus.sh && citus_vendor_dir)
    rm -rf "$root/shared/vendor"
    mkdir -p "$root/shared/vendor"
    cp "$vendor"/citus-*.tar.gz "$vendor"/*.patch "$root/shared/vendor/" 2>/dev/null || true
    echo "matrix: the Citus stage in $root"
    in_root "$root" cmake --build "$build" -j2 --target citus_processor >"$root/citus-build.log" 2>&1 \
        || { tail -20 "$root/citus-build.log"; return 1; }
    in_root "$root" PGBIN="$pgbin" bash /src/test/stages/citus.sh --port "$port" --build-dir "$build" --no-build \
        >"$root/citus.log" 2>&1 || { grep -vE '^ok' "$root/citus.log" | tail -40; return 1; }
    echo "matrix: Citus: $(grep 'handed to the processor' "$root/citus.log" | sed 's/^ok   - //'); $(tail -1 "$root/citus.log")"
}

# run_leg MAJOR PORT: one leg, its outcome and timings noted.
run_leg() {
    local t0 rc=0
    t0=$(date +%s) t_root=- t_build=- t_tests=- t_client=
    leg_steps "$@" || rc=1
    timings+=("PostgreSQL $1 ($(suite_of "$1")): root ${t_root}s, build ${t_build}s, SQL tests ${t_tests}s,${t_client:+ client ${t_client}s,} leg $(($(date +%s) - t0))s$([ $rc -eq 0 ] || echo ' FAILED')")
    return $rc
}

timings=() failed=()
i=0
for major in $legs; do
    run_leg "$major" $((port_base + i)) || failed+=("$major")
    i=$((i + 1))
done
echo "matrix timings:"
for t in "${timings[@]+"${timings[@]}"}"; do echo "  $t"; done
if [ ${#failed[@]} -ne 0 ]; then
    echo "matrix: FAILED on PostgreSQL ${failed[*]}"
    exit 1
fi
echo "matrix: PostgreSQL $legs passed"
