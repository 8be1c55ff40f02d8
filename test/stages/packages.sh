#!/usr/bin/env bash
# The Debian packages (debian/), built and installed the way a user gets
# them: for each Debian suite of test/stages/matrix.sh (trixie: PostgreSQL 17,
# forky: PostgreSQL 18) `dpkg-buildpackage -us -uc -B` builds
# postgresql-NN-changefeed, libchangefeed-client0.3, libchangefeed-dev and
# changefeed-cli in a build root kept in the cache (a copy of the matrix
# root with the rest of the Build-Depends, made when missing; its ccache
# makes a rebuild of unchanged sources cheap; nocheck: the suites run
# against the installed packages here and in test/stages/matrix.sh).  Then on an
# overlay of a root with nothing but debootstrap's minimal base,
# `apt-get install ./*.deb` installs them, a small program is built against
# the installed client with find_package(changefeed) (test/find_package_project)
# and with pkg-config (test/pkg_config_project), and the demo runs: a cluster
# of that root's PostgreSQL preloading the installed library, CREATE
# EXTENSION, a table enabled and written, and its changes read by a
# processor built with find_package and by the installed `changefeed tail`.
# The cached roots stay as they are; the packages are left in --out.
#
#   test/stages/packages.sh [--suites "trixie forky"] [--cache DIR] [--port N] [--out DIR] [--no-build]
#
# --no-build installs and checks the packages a previous run left in --out.
# Run as root. Prints each step's timings; exits non-zero when a suite fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
checkout=$(pwd)

source test/support/stage.sh
suites=trixie
# The client library's package, named after its SONAME.
lib_package=libchangefeed-client0.3
cache=${CHANGEFEED_MATRIX_CACHE:-/var/cache/changefeed-matrix}
port=55498
out=/tmp/changefeed-packages
build=yes
parse_options packages.sh --suites=suites --cache=cache --port=port --out=out --no-build=build: -- "$@"

. test/support/debian_roots.sh
trap cleanup EXIT
trap "exit 130" INT TERM

major_of() {  # the Debian suite -> the PostgreSQL major it ships
    case "$1" in
        trixie) echo 17 ;;
        forky) echo 18 ;;
        *) echo "packages.sh: no PostgreSQL major known for Debian $1" >&2; return 1 ;;
    esac
}
# Per port, so that runs beside each other (on other ports) keep apart.
scratch=/var/tmp/changefeed-packages/$port
mkdir -p "$scratch"
declare -A elapsed
step_start() { t=$(date +%s); }
step_end() { elapsed[$1]=$(($(date +%s) - t)); }

# make_build_root SUITE: $cache/SUITE-debbuild, a copy of the suite's matrix
# root (its compilers, PostgreSQL server headers, libpqxx and Boost.JSON are
# installed already) with the rest of debian/control's Build-Depends and
# ccache, made once; the builds happen in it and its ccache makes a rebuild
# of an unchanged file a cache hit.
make_build_root() {
    local suite=$1 major root tmp
    major=$(major_of "$suite")
    root=$cache/$suite-debbuild
    [ -f "$root/.changefeed-matrix-ready" ] && return 0
    make_root "$major" || return 1
    tmp=$root.partial
    awk -v p="$tmp/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l
    rm -rf --one-file-system "$tmp"
    echo "packages: $suite: making the build root $root"
    # Its own file system only: a matrix leg running meanwhile mounts /proc in it.
    cp -a -x --reflink=auto "$cache/$suite" "$tmp" || { echo "packages: copying $cache/$suite failed"; return 1; }
    rm -rf --one-file-system "$tmp/src" "$tmp/var/tmp/changefeed-client-build" "$tmp/.changefeed-matrix-ready"
    fast_dpkg "$tmp"
    mount_in "$tmp"
    { apt_in "$tmp" update && apt_in "$tmp" install -y --no-install-recommends build-essential dpkg-dev debhelper ccache \
          postgresql-server-dev-all libcli11-dev pkgconf cmake libpqxx-dev libboost-json-dev libssl-dev \
          && apt_in "$tmp" clean; } >"$root.apt.log" 2>&1 || { tail -20 "$root.apt.log"; umount_in "$tmp"; return 1; }
    umount_in "$tmp"
    touch "$tmp/.changefeed-matrix-ready"
    rm -rf --one-file-system "$root"
    mv "$tmp" "$root"
}

# build_packages SUITE: the .deb files of the checkout, built in the suite's
# build root (one build at a time: a lock), copied to $out/SUITE.
build_packages() {
    local suite=$1 root
    make_build_root "$suite" || return 1
    root=$cache/$suite-debbuild
    exec 9>"$root.lock"
    flock 9
    rm -rf --one-file-system "$root/build"
    mkdir -p "$root/build/changefeed"
    tar -C "$checkout" --exclude-vcs --exclude='./build*' --exclude='./results' --exclude='./output_iso' \
        --exclude='./obj-*' --exclude='./debian/tmp' --exclude='./extension/*.o' --exclude='./extension/*.d' --exclude='./extension/*/*.o' --exclude='./extension/*/*.d' \
        --exclude='./*.so' -cf - . | tar -C "$root/build/changefeed" -xf -
    mount_in "$root"
    # Build-Depends added since the root was made.
    if ! in_root "$root" bash -c "cd /build/changefeed && dpkg-checkbuilddeps" >/dev/null 2>&1; then
        echo "packages: $suite: installing new build dependencies"
        { apt_in "$root" update && in_root "$root" bash -c "cd /build/changefeed && DEBIAN_FRONTEND=noninteractive \
              apt-get -qq build-dep -y --no-install-recommends ./" && apt_in "$root" clean; } \
            >"$scratch/build-$suite.apt.log" 2>&1 || { tail -20 "$scratch/build-$suite.apt.log"; umount_in "$root"; return 1; }
    fi
    echo "packages: $suite: dpkg-buildpackage -us -uc -B (nocheck, ccache)"
    # debian/control names the PostgreSQL of the suite the checkout was
    # prepared on; pg_buildext rewrites it for this suite's versions.  The
    # suites run against the installed packages below, hence nocheck.
    local rc=0
    in_root "$root" PATH=/usr/lib/ccache:/usr/sbin:/usr/bin:/sbin:/bin CCACHE_DIR=/var/cache/ccache \
        CCACHE_MAXSIZE=2G bash -c "cd /build/changefeed && PG_UPDATECONTROL=yes \
            DEB_BUILD_OPTIONS='nocheck noautodbgsym parallel=2' dpkg-buildpackage -us -uc -B \
            && ccache --show-stats" >"$scratch/build-$suite.log" 2>&1 || rc=1
    umount_in "$root"
    if [ $rc -ne 0 ]; then
        grep -E 'error|Error' "$scratch/build-$suite.log" | head -40; tail -20 "$scratch/build-$suite.log"
        return 1
    fi
    grep -iE '^(cache )?hits|hit rate|cacheable' "$scratch/build-$suite.log" | sed "s/^/packages: $suite: ccache: /" | head -3
    rm -rf "$out/$suite"
    mkdir -p "$out/$suite"
    cp "$root"/build/*.deb "$out/$suite/"
    soname_check "$out/$suite" || return 1
    rm -rf --one-file-system "$root/build"
    flock -u 9
    ls "$out/$suite"
}

# soname_check DIR: the library package is named after the SONAME it ships
# (libfoo_bar.so.0.3 -> libfoo-bar0.3).
soname_check() {
    local tmp soname want
    tmp=$(mktemp -d)
    dpkg-deb -x "$1/${lib_package}_"*.deb "$tmp" || { rm -rf "$tmp"; return 1; }
    soname=$(objdump -p "$tmp"/usr/lib/*/libchangefeed_client.so.*.*.* | awk '$1 == "SONAME" {print $2}')
    rm -rf "$tmp"
    want=$(echo "$soname" | sed -E 's/\.so\./-/; s/_/-/g; s/-([0-9])/\1/g; s/^(.*[a-z])-?([0-9].*)$/\1\2/')
    [ "$want" = "$lib_package" ] || { echo "packages: the library's SONAME $soname wants package $want, not $lib_package"; return 1; }
}

# install_packages SUITE PORT: $out/SUITE/*.deb on an overlay of a minimal
# root of the suite, then the demo against what they installed.
install_packages() {
    local suite=$1 port=$2 major root pgbin lists c=/tmp/packages-cluster
    major=$(major_of "$suite")
    pgbin=/usr/lib/postgresql/$major/bin
    make_clean_root "$suite" || return 1
    overlay_root "$cache/$suite-minbase" "$scratch/install-$suite" in-memory
    root=$scratch/install-$suite/root
    fast_dpkg "$root"
    # apt's package lists, kept like its downloads and fetched again after a day.
    lists=$cache/apt-lists/$suite-minbase
    mkdir -p "$lists/partial"
    mount --bind "$lists" "$root/var/lib/apt/lists" && mounted+=("$root/var/lib/apt/lists")
    mkdir -p "$root/tmp/debs" "$root/tmp/t"
    cp "$out/$suite"/*.deb "$root/tmp/debs/"
    echo "packages: $suite: apt-get install ./*.deb on a minimal root"
    { if [ -z "$(find "$lists" -maxdepth 1 -name '*Packages*' -mmin -1440 -print -quit)" ]; then
          apt_in "$root" update; fi \
      && in_root "$root" bash -c "cd /tmp/debs && DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends ./*.deb"; } \
        >"$scratch/install-$suite.apt.log" 2>&1 || { tail -20 "$scratch/install-$suite.apt.log"; return 1; }
    local p
    for p in "postgresql-$major-changefeed" "$lib_package" libchangefeed-dev changefeed-cli; do
        in_root "$root" dpkg-query -W -f='${Status}' "$p" | grep -q "install ok installed" \
            || { echo "packages: $p is not installed"; return 1; }
    done
    # Compilers for the programs built against the installed client.  The
    # client's own dependencies (libpqxx-dev, libboost-json-dev) come with
    # libchangefeed-dev.
    apt_in "$root" install -y --no-install-recommends cmake g++ make pkgconf \
        >>"$scratch/install-$suite.apt.log" 2>&1 || { tail -20 "$scratch/install-$suite.apt.log"; return 1; }
    step_end "$suite install"; step_start
    echo "packages: $suite: building test/find_package_project and test/pkg_config_project"
    cp -r test/find_package_project test/pkg_config_project "$root/tmp/t/"
    in_root "$root" bash -c "cmake -S /tmp/t/find_package_project -B /tmp/t/fp >/dev/null \
        && cmake --build /tmp/t/fp -j2 >/dev/null && /tmp/t/fp/find_package_app" || return 1
    in_root "$root" bash /tmp/t/pkg_config_project/build.sh /usr/lib /tmp/t/pc || return 1
    step_end "$suite client"; step_start
    # The demo: a cluster of the root's PostgreSQL preloading the installed
    # library (the cluster script where cleanup looks for it), CREATE
    # EXTENSION, a table enabled and written, its changes read by the
    # processor just built and by the installed command-line tool.
    mkdir -p "$root/src/test/support"
    cp test/cluster.sh "$root/src/test/"
    cp test/support/stage.sh "$root/src/test/support/"
    clusters+=("$root|$c|$pgbin")
    in_root "$root" PGBIN="$pgbin" bash /src/test/cluster.sh start "$c" --port "$port" --fsync-off >/dev/null || return 1
    in_root "$root" bash -c "eval \"\$(bash /src/test/cluster.sh env $c)\" && set -e
        psql -X -q -v ON_ERROR_STOP=1 -At >/tmp/t/setup.out <<'SQL'
CREATE EXTENSION changefeed;
SELECT extversion FROM pg_extension WHERE extname = 'changefeed';
SELECT setting FROM pg_settings WHERE name = 'shared_preload_libraries';
CREATE TABLE public.items (id bigint PRIMARY KEY, name text);
SELECT changefeed.enable('public.items') IS NOT NULL;
SELECT changefeed.current_position();
SQL
        pos=\$(tail -1 /tmp/t/setup.out)
        psql -X -q -v ON_ERROR_STOP=1 -c \"INSERT INTO public.items VALUES (1, 'one'), (2, 'two')\" \
            -c \"UPDATE public.items SET name = 'uno' WHERE id = 1\" -c 'DELETE FROM public.items WHERE id = 2'
        /tmp/t/fp/demo_processor '' public.items \"\$pos\" 4 60 >/tmp/t/processor.out 2>/tmp/t/processor.err
        changefeed tail public.items --from \"\$pos\" --count 4 --timeout 60 >/tmp/t/tail.out 2>/tmp/t/tail.err
        changefeed status >/tmp/t/status.out" || { tail -n 20 "$root"/tmp/t/*.out "$root"/tmp/t/*.err 2>/dev/null; return 1; }
    in_root "$root" PGBIN="$pgbin" bash /src/test/cluster.sh stop "$c" >/dev/null || return 1
    demo_checks "$suite" "$root/tmp/t" || return 1
    in_root "$root" changefeed --version | sed "s/^/packages: $suite: /"
    step_end "$suite demo"
    umount_in "$root"
}

# demo_checks SUITE DIR: what the demo printed, against what it must print.
demo_checks() {
    local suite=$1 d=$2 ok=0 want got
    want=$(printf '%s\n' 0.3 changefeed t)
    got=$(head -3 "$d/setup.out")
    [ "$got" = "$want" ] || { echo "packages: $suite: CREATE EXTENSION / enable(): got"; echo "$got"; ok=1; }
    # Both readers see the four changes in each document's order.
    want=$(printf '%s\n' 'create 1 {"id":1,"name":"one"}' 'replace 1 {"id":1,"name":"uno"}' \
                         'create 2 {"id":2,"name":"two"}' 'delete 2 null')
    got=$(sort -s -k2,2 "$d/processor.out")
    [ "$got" = "$want" ] || { echo "packages: $suite: the processor printed"; cat "$d/processor.out"; ok=1; }
    # changefeed tail's text lines: time, operation, doc_id, range, document.
    got=$(sed -E 's/^[^ ]+ +//; s/  range=[0-9]+//; s/ +/ /g; s/: /:/g; s/, /,/g' "$d/tail.out" | sort -s -k2,2)
    want=$(printf '%s\n' 'create 1 {"id":1,"name":"one"}' 'replace 1 {"id":1,"name":"uno"}' \
                         'create 2 {"id":2,"name":"two"}' 'delete 2 previous={"id":2,"name":"two"}')
    [ "$got" = "$want" ] || { echo "packages: $suite: changefeed tail printed"; cat "$d/tail.out"; ok=1; }
    grep -qx 'items: intact' "$d/status.out" && grep -qx 'library preloaded: yes' "$d/status.out" \
        || { echo "packages: $suite: changefeed status printed"; cat "$d/status.out"; ok=1; }
    [ $ok -eq 0 ] && echo "packages: $suite: demo: the processor and changefeed tail read the 4 changes"
    return $ok
}

failed=() i=0
for suite in $suites; do
    t0=$(date +%s)
    step_start
    if [ -z "$build" ] || build_packages "$suite"; then
        step_end "$suite build"; step_start
        install_packages "$suite" $((port + i)) || failed+=("$suite")
    else
        failed+=("$suite")
    fi
    elapsed["$suite total"]=$(($(date +%s) - t0))
    i=$((i + 1))
done
# The overlays' changes (gigabytes) are dropped; their logs stay.
t=$(date +%s)
cleanup
mounted=() clusters=()
for suite in $suites; do
    rm -rf --one-file-system "$scratch/build-$suite" "$scratch/install-$suite"
done
elapsed[cleanup]=$(($(date +%s) - t))
echo "packages timings:"
for k in "${!elapsed[@]}"; do echo "  $k: ${elapsed[$k]}s"; done | sort
if [ ${#failed[@]} -ne 0 ]; then
    echo "packages: FAILED on ${failed[*]}"
    exit 1
fi
echo "packages: $suites passed"
