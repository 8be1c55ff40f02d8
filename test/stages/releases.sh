#!/usr/bin/env bash
# Released install scripts are frozen, and every release upgrades to the
# working version.  Fails when
#   - a script in extension/releases/ differs from the checksum recorded in
#     extension/releases/SHA256SUMS, or a release has no recorded checksum
#     (a database installed from it must meet the same script forever);
#   - the working version (changefeed.control's default_version) is not the
#     Makefile's EXTVERSION;
#   - a kept release has no chain of upgrade scripts to the working version
#     (released ones frozen in extension/upgrade/, those to the working version
#     built from extension/upgrade/delta/; ALTER EXTENSION changefeed UPDATE
#     would fail there);
#   - the working version is itself a release whose script differs from what
#     the concern files build (frozen, then changed without a new version);
#   - the library (when built) lacks a C symbol that a release or an upgrade
#     script names: an installed old version must keep loading.
# Usage: bash test/stages/releases.sh              check
#        bash test/stages/releases.sh --record     record the checksum of a new release
set -euo pipefail
cd "$(dirname "$0")/../.."
sums=extension/releases/SHA256SUMS

if [ "${1:-}" = --record ]; then
    (cd extension/releases && sha256sum changefeed--*.sql) >"$sums"
    cat "$sums"
    exit 0
fi

failed=0
fail() { echo "releases: $*" >&2; failed=1; }

# Frozen scripts.
releases=$(cd extension/releases && { ls changefeed--*.sql 2>/dev/null || true; } | sed 's/^changefeed--\(.*\)\.sql$/\1/' | sort -V)
[ -n "$releases" ] || fail "no release in extension/releases/"
[ -f "$sums" ] || fail "$sums is missing"
for v in $releases; do
    grep -q " changefeed--$v\.sql\$" "$sums" 2>/dev/null ||
        fail "release $v has no checksum in $sums (bash test/stages/releases.sh --record, once, when it is released)"
done
if [ -f "$sums" ] && ! out=$(cd extension/releases && sha256sum --quiet -c SHA256SUMS 2>&1); then
    fail "a released script changed; released scripts are frozen (put the change in an upgrade script):"
    sed 's/^/    /' <<<"$out" >&2
fi

# The working version.
current=$(sed -n "s/^default_version = '\(.*\)'\$/\1/p" extension/changefeed.control)
makefile=$(sed -n 's/^EXTVERSION = //p' Makefile)
[ -n "$current" ] || fail "no default_version in extension/changefeed.control"
[ "$current" = "$makefile" ] ||
    fail "changefeed.control says version $current, the Makefile's EXTVERSION $makefile"

if grep -qx "$current" <<<"$releases"; then
    # Released: the sources must still build exactly the frozen script.
    python3 extension/build_sql.py install | cmp -s - "extension/releases/changefeed--$current.sql" ||
        fail "version $current is released but the concern files no longer build its script: start the next version"
else
    # Every release reaches the working version through upgrade scripts.
    edges=$({ (cd extension/upgrade && ls changefeed--*--*.sql 2>/dev/null) || true
              (cd extension/upgrade/delta && ls *--"$current".sql 2>/dev/null) || true; } |
        sed 's/^\(changefeed--\)\{0,1\}\(.*\)--\(.*\)\.sql$/\2 \3/')
    for v in $releases; do
        reached=" $v " frontier=$v
        while [ -n "$frontier" ]; do
            next=
            for f in $frontier; do
                for to in $(awk -v f="$f" '$1 == f { print $2 }' <<<"$edges"); do
                    case "$reached" in *" $to "*) ;; *) reached+="$to " next+=" $to" ;; esac
                done
            done
            frontier=$next
        done
        case "$reached" in
            *" $current "*) ;;
            *) fail "no upgrade path from release $v to $current (add extension/upgrade/delta/$v--$current.sql)" ;;
        esac
    done
fi

# C symbols the released and upgrade scripts bind to.
if [ -f changefeed.so ]; then
    exported=$(nm -D --defined-only changefeed.so | awk '{ print $NF }' | sort -u)
    for script in extension/releases/changefeed--*.sql extension/upgrade/changefeed--*--*.sql extension/changefeed--*--*.sql; do
        [ -f "$script" ] || continue
        for sym in $(grep -o "'MODULE_PATHNAME', *'[A-Za-z0-9_]*'" "$script" | sed "s/.*, *'\(.*\)'/\1/" | sort -u); do
            grep -qx "$sym" <<<"$exported" || fail "$script names C symbol $sym, which changefeed.so no longer exports"
        done
    done
    symbols="C symbols present"
else
    symbols="C symbols not checked (changefeed.so not built)"
fi

[ "$failed" -eq 0 ] && echo "releases: $(wc -w <<<"$releases") release(s) frozen ($(echo $releases)), upgrade path to $current, $symbols"
exit "$failed"
