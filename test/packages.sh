#!/usr/bin/env bash
# The Debian packages (debian/), built and installed the way a user gets
# them: in each Debian root of test/matrix.sh (trixie: PostgreSQL 17, forky:
# PostgreSQL 18) `dpkg-buildpackage -us -uc -b` builds
# postgresql-NN-changefeed, libchangefeed0, libchangefeed-dev and
# changefeed-cli; then on a root with nothing but debootstrap's minimal base,
# `apt-get install ./*.deb` installs them, a cluster of that root's
# PostgreSQL preloads the installed library, `CREATE EXTENSION changefeed`
# runs and a write is read back from the feed, the command-line tool runs,
# and a small program is built against the installed client twice: with
# find_package(changefeed) (test/find_package_project) and with pkg-config
# (test/pkg_config_project).  Both roots are overlays: the cached roots stay
# as they are, and the packages are left in --out.
#
#   test/packages.sh [--suites "trixie forky"] [--cache DIR] [--port N] [--out DIR] [--no-build]
#
# --no-build installs and checks the packages a previous run left in --out.
# Run as root. Prints each step's timings; exits non-zero when a suite fails.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout=$(pwd)

suites=trixie
cache=${CHANGEFEED_MATRIX_CACHE:-/var/cache/changefeed-matrix}
port=55498
out=/tmp/changefeed-packages
build=yes
while [ $# -gt 0 ]; do
    case "$1" in
        --suites) suites=$2; shift ;;
        --cache) cache=$2; shift ;;
        --port) port=$2; shift ;;
        --out) out=$2; shift ;;
        --no-build) build= ;;
        *) echo "packages.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

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
scratch=/var/tmp/changefeed-packages
declare -A elapsed
step_start() { t=$(date +%s); }
step_end() { elapsed[$1]=$(($(date +%s) - t)); }

# build_packages SUITE: the .deb files of the checkout, built in an overlay
# of the suite's matrix root, copied to $out/SUITE.
build_packages() {
    local suite=$1 major root
    major=$(major_of "$suite")
    make_root "$major" || return 1
    overlay_root "$cache/$suite" "$scratch/build-$suite"
    root=$scratch/build-$suite/root
    rm -rf --one-file-system "$root/build"
    mkdir -p "$root/build/changefeed"
    tar -C "$checkout" --exclude-vcs --exclude='./build*' --exclude='./results' --exclude='./output_iso' \
        --exclude='./obj-*' --exclude='./debian/tmp' --exclude='./extension/*.o' --exclude='./extension/*.d' \
        --exclude='./*.so' -cf - . | tar -C "$root/build/changefeed" -xf -
    echo "packages: $suite: installing the build dependencies"
    { apt_in "$root" update && apt_in "$root" install -y --no-install-recommends dpkg-dev \
          && in_root "$root" bash -c "cd /build/changefeed && DEBIAN_FRONTEND=noninteractive \
                 apt-get -qq build-dep -y --no-install-recommends ./"; } \
        >"$scratch/build-$suite.apt.log" 2>&1 || { tail -20 "$scratch/build-$suite.apt.log"; return 1; }
    echo "packages: $suite: dpkg-buildpackage -us -uc -b"
    # debian/control names the PostgreSQL of the suite the checkout was
    # prepared on; pg_buildext rewrites it for this suite's versions.
    in_root "$root" bash -c "cd /build/changefeed && PG_UPDATECONTROL=yes DEB_BUILD_OPTIONS=noautodbgsym \
            dpkg-buildpackage -us -uc -b -j2" >"$scratch/build-$suite.log" 2>&1 \
        || { grep -E 'error|Error' "$scratch/build-$suite.log" | head -40; tail -20 "$scratch/build-$suite.log"; return 1; }
    rm -rf "$out/$suite"
    mkdir -p "$out/$suite"
    cp "$root"/build/*.deb "$out/$suite/"
    ls "$out/$suite"
    umount_in "$scratch/build-$suite/root"
}

# install_packages SUITE PORT: $out/SUITE/*.deb on an overlay of a minimal
# root of the suite, then the checks above.
install_packages() {
    local suite=$1 port=$2 major root pgbin c=/tmp/packages-cluster
    major=$(major_of "$suite")
    pgbin=/usr/lib/postgresql/$major/bin
    make_clean_root "$suite" || return 1
    overlay_root "$cache/$suite-minbase" "$scratch/install-$suite"
    root=$scratch/install-$suite/root
    mkdir -p "$root/tmp/debs" "$root/tmp/t"
    cp "$out/$suite"/*.deb "$root/tmp/debs/"
    echo "packages: $suite: apt-get install ./*.deb on a minimal root"
    { apt_in "$root" update \
          && in_root "$root" bash -c "cd /tmp/debs && DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends ./*.deb"; } \
        >"$scratch/install-$suite.apt.log" 2>&1 || { tail -20 "$scratch/install-$suite.apt.log"; return 1; }
    local p
    for p in "postgresql-$major-changefeed" libchangefeed0 libchangefeed-dev changefeed-cli; do
        in_root "$root" dpkg-query -W -f='${Status}' "$p" | grep -q "install ok installed" \
            || { echo "packages: $p is not installed"; return 1; }
    done
    step_end "$suite install"; step_start
    # The extension: preloaded by a cluster of the root's PostgreSQL (the
    # cluster script where cleanup looks for it).
    mkdir -p "$root/src/test"
    cp test/cluster.sh "$root/src/test/"
    clusters+=("$root|$c|$pgbin")
    in_root "$root" PGBIN="$pgbin" bash /src/test/cluster.sh start "$c" --port "$port" --fsync-off >/dev/null || return 1
    local got
    got=$(in_root "$root" bash -c "eval \"\$(bash /src/test/cluster.sh env $c)\" && psql -X -q -v ON_ERROR_STOP=1 -At <<'SQL'
CREATE EXTENSION changefeed;
CREATE TABLE public.items (id bigint PRIMARY KEY, name text);
SELECT changefeed.enable('public.items') IS NOT NULL;
SELECT changefeed.current_position() AS pos \\gset
INSERT INTO public.items VALUES (1, 'one');
SELECT extversion FROM pg_extension WHERE extname = 'changefeed';
SELECT operation || ' ' || doc_id || ' ' || (current->>'name') FROM changefeed.read('public.items', :'pos');
SQL") || { echo "$got"; return 1; }
    echo "$got" | sed 's/^/packages:   psql: /'
    [ "$(echo "$got" | tail -2 | tr '\n' '|')" = "0.3|create 1 one|" ] \
        || { echo "packages: $suite: unexpected result of CREATE EXTENSION / read"; return 1; }
    in_root "$root" PGBIN="$pgbin" bash /src/test/cluster.sh stop "$c" >/dev/null || return 1
    in_root "$root" changefeed --version || return 1
    step_end "$suite extension"; step_start
    # The client: a program built against the installed headers and library.
    echo "packages: $suite: building test/find_package_project and test/pkg_config_project"
    apt_in "$root" install -y --no-install-recommends cmake g++ make pkgconf \
        >>"$scratch/install-$suite.apt.log" 2>&1 || { tail -20 "$scratch/install-$suite.apt.log"; return 1; }
    cp -r test/find_package_project test/pkg_config_project "$root/tmp/t/"
    in_root "$root" bash -c "cmake -S /tmp/t/find_package_project -B /tmp/t/fp >/dev/null \
        && cmake --build /tmp/t/fp >/dev/null && /tmp/t/fp/find_package_app" || return 1
    in_root "$root" bash /tmp/t/pkg_config_project/build.sh /usr/lib /tmp/t/pc || return 1
    step_end "$suite client"
    umount_in "$root"
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
cleanup
mounted=() clusters=()
for suite in $suites; do
    rm -rf --one-file-system "$scratch/build-$suite" "$scratch/install-$suite"
done
echo "packages timings:"
for k in "${!elapsed[@]}"; do echo "  $k: ${elapsed[$k]}s"; done | sort
if [ ${#failed[@]} -ne 0 ]; then
    echo "packages: FAILED on ${failed[*]}"
    exit 1
fi
echo "packages: $suites passed"
