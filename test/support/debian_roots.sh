# Debian roots for the tests on other distributions (sourced by
# test/stages/matrix.sh and test/stages/packages.sh): roots made with debootstrap into a
# cache folder ($cache, set by the caller), chroot helpers, and the mounts
# and servers undone on exit.  Run as root.

suite_of() {  # PostgreSQL major -> the Debian suite that ships it
    case "$1" in
        17) echo trixie ;;
        18) echo forky ;;
        *) echo "matrix.sh: no Debian suite known for PostgreSQL $1" >&2; return 1 ;;
    esac
}

# The Debian mirror the host's apt uses (its main archive, not -security).
host_mirror() {
    local uri
    uri=$(grep -hs -E '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
              /etc/apt/sources.list.d/*.sources 2>/dev/null \
          | grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v security | head -1 | tr -d ' ')
    echo "${uri:-http://deb.debian.org/debian}"
}

need_debootstrap() {
    command -v debootstrap >/dev/null && return 0
    echo "matrix: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
}

# Everything mounted or started, undone on exit (in reverse order).
mounted=() clusters=()
cleanup() {
    local i
    for i in "${clusters[@]+"${clusters[@]}"}"; do  # ROOT|DIR|PGBIN
        local r=${i%%|*} rest=${i#*|}
        local c=${rest%%|*} bin=${rest#*|}
        [ -f "$r$c/data/postmaster.pid" ] || continue
        in_root "$r" PGBIN="$bin" bash /src/test/cluster.sh stop "$c" --immediate >/dev/null 2>&1 || true
    done
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[$i]}" 2>/dev/null || true
    done
}
mount_in() {  # mount_in ROOT: /proc and a private /dev/shm (POSIX shared memory)
    local r=$1
    mkdir -p "$r/proc" "$r/dev/shm"
    mount -t proc proc "$r/proc" && mounted+=("$r/proc")
    mount -t tmpfs -o mode=1777 shm "$r/dev/shm" && mounted+=("$r/dev/shm")
}
umount_in() {  # umount_in ROOT: undoes mount_in
    local keep=() m
    for m in "${mounted[@]+"${mounted[@]}"}"; do
        case "$m" in
            "$1"/*) umount -l "$m" 2>/dev/null || true ;;
            *) keep+=("$m") ;;
        esac
    done
    mounted=("${keep[@]+"${keep[@]}"}")
}
in_root() {  # in_root ROOT COMMAND...: runs COMMAND in the root, with none of the host's PG* settings
    chroot "$1" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "${@:2}"
}
apt_in() {  # apt_in ROOT ARGS...: apt-get inside the root, quietly
    in_root "$1" DEBIAN_FRONTEND=noninteractive apt-get -qq "${@:2}"
}

# bootstrap_root SUITE DIR: a minimal root of SUITE in DIR (debootstrap
# minbase), whose apt accepts a stale Release file and in which no service
# starts and no PostgreSQL package makes a default cluster.
bootstrap_root() {
    local suite=$1 dir=$2 script=
    need_debootstrap
    # Debian 12's debootstrap has no script for forky; sid's is the same.
    [ -e "/usr/share/debootstrap/scripts/$suite" ] || script=/usr/share/debootstrap/scripts/sid
    echo "matrix: creating a $suite root in $dir (mirror $(host_mirror))"
    debootstrap --variant=minbase "$suite" "$dir" "$(host_mirror)" $script >"$dir.debootstrap.log" 2>&1 \
        || { tail -20 "$dir.debootstrap.log"; return 1; }
    # A testing suite's Release file can be past its Valid-Until.
    echo 'Acquire::Check-Valid-Until "false";' >"$dir/etc/apt/apt.conf.d/99changefeed-matrix"
    printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
    chmod 755 "$dir/usr/sbin/policy-rc.d"
    mkdir -p "$dir/etc/postgresql-common"
    echo "create_main_cluster = false" >"$dir/etc/postgresql-common/createcluster.conf"
}

# make_root MAJOR: $cache/SUITE with PostgreSQL MAJOR and the build tools.
# Built beside its final place and renamed at the end, so that a root that
# exists is a complete one.
make_root() {
    local major=$1 suite root tmp
    suite=$(suite_of "$major")
    root=$cache/$suite
    [ -f "$root/.changefeed-matrix-ready" ] && return 0
    tmp=$cache/$suite.partial
    # A creation that was killed may have left mounts in its partial root.
    awk -v p="$tmp/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l
    rm -rf --one-file-system "$tmp"
    mkdir -p "$cache"
    bootstrap_root "$suite" "$tmp" || return 1
    mount_in "$tmp"
    apt_in "$tmp" update
    apt_in "$tmp" install -y --no-install-recommends \
        "postgresql-$major" "postgresql-server-dev-$major" g++ make libssl-dev python3 >"$cache/$suite.apt.log" 2>&1 \
        || { tail -20 "$cache/$suite.apt.log"; return 1; }
    apt_in "$tmp" clean
    umount_in "$tmp"
    touch "$tmp/.changefeed-matrix-ready"
    rm -rf "$root"
    mv "$tmp" "$root"
}

# make_clean_root SUITE: $cache/SUITE-minbase, a root with nothing but
# debootstrap's minimal base, on which packages are installed as on a new
# machine.
make_clean_root() {
    local suite=$1 root tmp
    root=$cache/$suite-minbase
    [ -f "$root/.changefeed-matrix-ready" ] && return 0
    tmp=$root.partial
    rm -rf --one-file-system "$tmp"
    mkdir -p "$cache"
    bootstrap_root "$suite" "$tmp" || return 1
    touch "$tmp/.changefeed-matrix-ready"
    rm -rf "$root"
    mv "$tmp" "$root"
}

# overlay_root LOWER DIR [in-memory]: mounts at DIR/root a writable overlay
# of the root LOWER (its changes go to DIR/upper, LOWER stays as it is), with
# apt's downloads kept in $cache/apt-archives/NAME-OF-LOWER so that a later
# run fetches nothing twice.  in-memory: DIR is a tmpfs, so the changes cost
# no disk writes and vanish with the unmount.
overlay_root() {
    local lower=$1 dir=$2 archives
    archives=$cache/apt-archives/$(basename "$lower")
    # A run that was killed may have left its overlay mounted.
    awk -v p="$dir/" 'index($2, p) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l
    awk -v p="$dir" '$2 == p {print $2}' /proc/mounts | xargs -r -n1 umount -l
    rm -rf --one-file-system "$dir"
    mkdir -p "$dir"
    if [ "${3:-}" = in-memory ]; then
        mount -t tmpfs -o size=6g,mode=755 changefeed-overlay "$dir" && mounted+=("$dir")
    fi
    mkdir -p "$dir/upper" "$dir/work" "$dir/root" "$archives/partial"
    mount -t overlay overlay -o "lowerdir=$lower,upperdir=$dir/upper,workdir=$dir/work" "$dir/root" \
        && mounted+=("$dir/root")
    mount --bind "$archives" "$dir/root/var/cache/apt/archives" && mounted+=("$dir/root/var/cache/apt/archives")
    # apt deletes its downloads after an install unless told to keep them.
    echo 'Binary::apt::APT::Keep-Downloaded-Packages "true";' >"$dir/root/etc/apt/apt.conf.d/99changefeed-keep"
    mount_in "$dir/root"
}

# fast_dpkg ROOT: dpkg in the root skips its fsync calls and man-db its index
# rebuilds, the slowest parts of an install in a throwaway or test root.
fast_dpkg() {
    mkdir -p "$1/etc/dpkg/dpkg.cfg.d" "$1/var/lib/man-db"
    echo force-unsafe-io >"$1/etc/dpkg/dpkg.cfg.d/99changefeed-unsafe-io"
    echo 'man-db man-db/auto-update boolean false' | chroot "$1" debconf-set-selections 2>/dev/null || true
    rm -f "$1/var/lib/man-db/auto-update"
}
