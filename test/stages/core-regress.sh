#!/usr/bin/env bash
# Runs PostgreSQL 15's own regression suite twice, on two throwaway clusters:
#   plain      no preload, no extension;
#   extension  library preloaded, `CREATE EXTENSION changefeed` in template1 and
#              in the suite's `regression` database,
# and fails listing every core test whose output differs only because of the
# extension (a good citizen of the database breaks none of them).  The plain
# run of the same machine is the reference, not the expected files.  Two tests
# have an expected difference, listed with its reason under "Expected
# differences" below: only the rows about our own objects may differ there.
#
# Usage (as root on Debian 12, extension built and installed):
#   bash test/stages/core-regress.sh [--keep] [--port N] [--cache DIR] [--compare DIR]
#     --keep     keep the scratch folder (results, diffs, server logs)
#     --port N   first of the two ports used (default 56150)
#     --cache    where the suite's sources are kept (default /var/cache/changefeed)
#     --compare  run nothing: compare again the two runs an earlier --keep left
#                in DIR (to work on the expected differences)
#
# The suite comes from Debian's source package of postgresql-15 at the installed
# version (or the closest one available); it is downloaded once into the cache.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
PG_CONFIG=${PG_CONFIG:-$PGBIN/pg_config}
export PGBIN
cache=/var/cache/changefeed
port=56150
keep=0
compare=
while [ $# -gt 0 ]; do
    case "$1" in
        --keep) keep=1 ;;
        --port) port=$2; shift ;;
        --cache) cache=$2; shift ;;
        --compare) compare=$2; shift ;;
        *) echo "core-regress.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

as_postgres() {
    if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }
t_start=$(date +%s)

# --- Expected differences ------------------------------------------------------
# Core tests that list every object of a kind in the database, and so see some
# of ours that must stay.  For these tests only, the two runs' results are
# compared after dropping the rows that match the test's pattern (checked on
# the line with psql's alignment padding squeezed to single spaces); the row
# counts are lowered by the rows dropped above them.  Any other difference in
# these tests still fails.  Keep the patterns as narrow as what differs.
declare -A allowed_rows allowed_why allowed_after
allowed_rows[type_sanity]='^[0-9]+ \| (log|log_read_idx)$'
allowed_why[type_sanity]='changefeed.log is partitioned by day, so that retention drops whole partitions instead of deleting rows: a partitioned table has no access method (relam = 0) and its index log_read_idx is a partitioned index (relkind I), which these pg_class checks predate'
allowed_rows[event_trigger]='^changefeed_[a-z0-9_]+ \| event trigger changefeed_[a-z0-9_]+ \| event trigger \| \{changefeed_[a-z0-9_]+\} \| \{\} \| \("event trigger",,changefeed_[a-z0-9_]+,changefeed_[a-z0-9_]+\)$'
allowed_why[event_trigger]='the test lists every event trigger of the database; the extension needs its own (named changefeed_*) to forget dropped tables and to refuse DDL that would let writes escape capture'
# The names of our SECURITY DEFINER functions are read from the extension's
# cluster once it is installed (see run_suite); only the rows of that one query.
allowed_after[opr_sanity]='^WHERE prosecdef$'
allowed_why[opr_sanity]='the test lists every SECURITY DEFINER function (core has none); the SQL surface of the extension is entry points that run as the caller and call SECURITY DEFINER implementations, so that no role reads the change log or the leases directly'

# --- 4. Tests that fail only with the extension -------------------------------
# Prints the hunks of regression.diffs about test $2 of run $1, bounded.
hunks_of() {
    awk -v t="/results/$2.out" '
        /^diff / { on = (substr($NF, length($NF) - length(t) + 1) == t) }
        on && n++ < 80' "$scratch/$1/out/regression.diffs"
}

# normalise TEST FILE DROPPED: prints result FILE of an allowlisted TEST as it
# is compared: alignment padding squeezed (our longer names widen psql's
# columns), rows matching the test's pattern dropped (written to DROPPED), each
# row count lowered by the rows dropped since the previous one.
normalise() {
    pattern=${allowed_rows[$1]} after=${allowed_after[$1]:-} awk -v dropped_to="$3" '
        BEGIN { pattern = ENVIRON["pattern"]; after = ENVIRON["after"]; armed = after == ""
                printf "" >dropped_to }
        {
            line = $0
            gsub(/ +/, " ", line); sub(/^ /, "", line); sub(/ $/, "", line)
            if (line ~ /^-+(\+-+)*$/) gsub(/-+/, "-", line)   # header rule
            if (after != "" && line ~ after) armed = 1
            if (armed && line ~ pattern) { dropped++; print line >dropped_to; next }
            if (line ~ /^\([0-9]+ rows?\)$/) {
                line = "(" (substr(line, 2) + 0 - dropped) " rows)"
                dropped = 0
                if (after != "") armed = 0
            }
            print line
        }' "$2"
}

# allowed_difference TEST: true when TEST is allowlisted and its two results
# are equal once normalised; then prints what was ignored, and why.
allowed_difference() {
    local t=$1 d=$scratch/allowed/$1 ignored
    [ -n "${allowed_rows[$t]+set}" ] || return 1
    mkdir -p "$d"
    normalise "$t" "$scratch/plain/out/results/$t.out" "$d/plain.dropped" >"$d/plain.out" &&
        normalise "$t" "$scratch/extension/out/results/$t.out" "$d/extension.dropped" >"$d/extension.out" &&
        cmp -s "$d/plain.out" "$d/extension.out" || return 1
    # The first field of each dropped row that is not a number: the name.
    ignored=$(awk -F ' [|] ' '{ for (i = 1; i <= NF; i++) if ($i !~ /^[0-9]+$/) { print $i; break } }' \
                  "$d/extension.dropped" | paste -sd, - | sed 's/,/, /g')
    echo "   expected difference in $t: ignored $(wc -l <"$d/extension.dropped") row(s) about our objects" \
         "(${ignored:-none}) and the row counts and column widths they change: ${allowed_why[$t]}"
}

compare_runs() {
    local name status plain_status
    only_ext=() both_differ=() both_same=() allowed=()
    rm -rf "$scratch/allowed"
    while read -r name status; do
        [ "$status" = FAILED ] || continue
        plain_status=$(awk -v n="$name" '$1 == n { print $2 }' "$scratch/plain/status")
        if [ "$plain_status" = FAILED ] &&
           cmp -s "$scratch/plain/out/results/$name.out" "$scratch/extension/out/results/$name.out"; then
            both_same+=("$name")
        elif allowed_difference "$name"; then
            allowed+=("$name")
        elif [ "$plain_status" != FAILED ]; then
            only_ext+=("$name")
        else
            both_differ+=("$name")
        fi
    done <"$scratch/extension/status"

    [ ${#both_same[@]} -eq 0 ] ||
        echo "   failing with and without the extension alike (not ours): ${both_same[*]}"
    bad=$(( ${#only_ext[@]} + ${#both_differ[@]} ))
    for name in "${only_ext[@]+"${only_ext[@]}"}" "${both_differ[@]+"${both_differ[@]}"}"; do
        echo
        if [ -f "$scratch/allowed/$name/extension.out" ]; then
            echo "---- $name: differs beyond its expected difference" \
                 "(plain vs extension, normalised, allowed rows dropped; first 80 lines)"
            diff -U3 "$scratch/allowed/$name/plain.out" "$scratch/allowed/$name/extension.out" | awk 'n++ < 80' || true
        elif [ "$(awk -v n="$name" '$1 == n { print $2 }' "$scratch/plain/status")" != FAILED ]; then
            echo "---- $name: fails only with the extension (regression.diffs, first 80 lines)"
            hunks_of extension "$name"
        else
            echo "---- $name: fails in both runs, differently (plain vs extension output, first 80 lines)"
            diff -U3 "$scratch/plain/out/results/$name.out" "$scratch/extension/out/results/$name.out" | awk 'n++ < 80' || true
        fi
    done
    if grep -q 'terminated by signal\|server process .* was terminated' "$scratch/extension/cluster/server.log"; then
        echo
        echo "---- the extension cluster's server crashed:"
        grep -B2 -A5 'terminated by signal' "$scratch/extension/cluster/server.log" | awk 'n++ < 40'
        bad=$((bad + 1))
    fi

    echo
    echo "== core regression suite: $(elapsed "$t_start") in all"
    if [ "$bad" -ne 0 ]; then
        echo "FAILED: core tests broken by the extension: ${only_ext[*]+"${only_ext[*]}"} ${both_differ[*]+"${both_differ[*]}"}"
        return 1
    fi
    echo "PASSED: no core test fails only with the extension${allowed[*]+ (expected differences: ${allowed[*]})}"
}

# --- 1. The suite's sources -------------------------------------------------

# Adds deb-src entries mirroring the configured `deb` ones, unless some exist.
ensure_deb_src() {
    if grep -rqsE --include='*.list' --include='*.sources' \
            '^[[:space:]]*(deb-src[[:space:]]|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        return 1
    fi
    local out=/etc/apt/sources.list.d/changefeed-deb-src.sources
    local f
    {
        echo "# Source packages, for changefeed's test/stages/core-regress.sh."
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] || continue
            # deb822 stanzas: keep those of type deb, as deb-src.
            awk 'BEGIN { RS = ""; ORS = "\n\n" }
                 /(^|\n)Types:[^\n]*deb([ \t\n]|$)/ {
                     sub(/Types:[^\n]*/, "Types: deb-src"); print }' "$f"
        done
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -f "$f" ] || continue
            sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f"
        done
    } >"$out.tmp"
    if [ -f /etc/apt/sources.list ] && grep -q '^deb-src ' "$out.tmp"; then
        # One-line entries cannot sit in a .sources file.
        grep '^deb-src ' "$out.tmp" >/etc/apt/sources.list.d/changefeed-deb-src.list
        grep -v '^deb-src ' "$out.tmp" >"$out"
    else
        mv "$out.tmp" "$out"
    fi
    rm -f "$out.tmp"
    echo "   added deb-src entries: $(ls /etc/apt/sources.list.d/changefeed-deb-src.*)"
    return 0
}

# Prints the folder of the extracted postgresql-15 source tree.
fetch_suite() {
    local want have version dl
    want=$(dpkg-query -W -f='${Version}' postgresql-15 2>/dev/null || true)
    # A previous run's tree of the installed version (or any, if that is all we can get).
    for have in "$cache/src/postgresql-15_$want" "$cache"/src/postgresql-15_*; do
        if [ -f "$have/src/test/regress/parallel_schedule" ]; then
            if [ "$have" = "$cache/src/postgresql-15_$want" ] ||
               [ "$(cat "$have/.stands-for" 2>/dev/null)" = "$want" ]; then
                echo "$have"; return 0
            fi
        fi
    done
    mkdir -p "$cache/download" "$cache/src"
    command -v dpkg-source >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q dpkg-dev >&2
    if ensure_deb_src >&2 || ! apt-cache showsrc postgresql-15 2>/dev/null | grep -q '^Version:'; then
        apt-get update -q >&2
    fi
    # The installed version first, then the others, newest first: a mirror may
    # list a source it does not serve (security updates often do).
    versions=$( (echo "$want"; apt-cache showsrc postgresql-15 | sed -n 's/^Version: //p' | sort -Vr) |
               awk 'NF && !seen[$0]++')
    dl="$cache/download"
    chown _apt "$dl" 2>/dev/null || true   # apt's download user writes there
    for version in $versions; do
        if ls "$dl/postgresql-15_${version#*:}.dsc" >/dev/null 2>&1 ||
           (cd "$dl" && apt-get source -q --download-only "postgresql-15=$version" >&2); then
            [ "$version" = "$want" ] || echo "   no source of the installed $want could be had; using $version" >&2
            rm -rf "$cache/src/postgresql-15_$version.tmp"
            dpkg-source --no-check -x "$dl/postgresql-15_${version#*:}.dsc" \
                "$cache/src/postgresql-15_$version.tmp" >&2
            mv "$cache/src/postgresql-15_$version.tmp" "$cache/src/postgresql-15_$version"
            rm -f "$cache"/src/*.tar.*   # dpkg-source copies the archives beside the tree
            [ "$version" = "$want" ] || echo "$want" >"$cache/src/postgresql-15_$version/.stands-for"
            echo "$cache/src/postgresql-15_$version"
            return 0
        fi
    done
    echo "core-regress.sh: no source package of postgresql-15 could be downloaded" >&2
    return 1
}

echo "== PostgreSQL's regression suite with and without changefeed"
if [ -n "$compare" ]; then
    scratch=$compare
    compare_runs
    exit
fi
src=$(fetch_suite)
regress_src=$src/src/test/regress
echo "   suite: $regress_src ($(elapsed "$t_start"))"

scratch=$(mktemp -d /tmp/changefeed-core-regress.XXXXXX)
chmod 755 "$scratch"
chown postgres "$scratch" 2>/dev/null || true
cleanup() {
    local c
    for c in "$scratch"/plain/cluster "$scratch"/extension/cluster; do
        [ -f "$c/data/postmaster.pid" ] && bash test/cluster.sh stop "$c" --immediate >/dev/null 2>&1 || true
    done
    if [ "$keep" = 1 ]; then echo "   kept $scratch"; else rm -rf "$scratch"; fi
}
trap cleanup EXIT

# --- 2. What the suite loads: regress.so, and autoinc/refint of contrib/spi --
t=$(date +%s)
mkdir -p "$scratch/lib"
cp "$regress_src/regress.c" "$src/contrib/spi/autoinc.c" "$src/contrib/spi/refint.c" "$scratch/lib/"
cat >"$scratch/lib/Makefile" <<'MAKE'
MODULES = regress autoinc refint
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
MAKE
make -s -C "$scratch/lib" PG_CONFIG="$PG_CONFIG" >"$scratch/lib/build.log" 2>&1 ||
    { cat "$scratch/lib/build.log"; exit 2; }
pg_regress=$(dirname "$("$PG_CONFIG" --pgxs)")/../../src/test/regress/pg_regress
[ -x "$pg_regress" ] || { echo "core-regress.sh: no pg_regress at $pg_regress" >&2; exit 2; }
echo "   built regress.so, autoinc.so, refint.so ($(elapsed "$t"))"

# --- 3. The two runs ----------------------------------------------------------
# One after the other: on two cores a concurrent run only adds timing noise.
run_suite() {  # $1 name, $2 port, then cluster.sh options
    local name=$1 p=$2 dir=$scratch/$1 t
    shift 2
    t=$(date +%s)
    mkdir -p "$dir/out"
    chown -R postgres "$dir"
    bash test/cluster.sh start "$dir/cluster" --port "$p" --fsync-off "$@"
    local load=()
    if [ "$name" = extension ]; then
        # Every database the suite creates comes from template1; pg_regress
        # makes `regression` itself from template0 and loads the extension there.
        as_postgres "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/cluster" -p "$p" -U postgres \
            -d template1 -c 'CREATE EXTENSION changefeed'
        local secdef
        secdef=$(as_postgres "$PGBIN/psql" -X -q -At -h "$dir/cluster" -p "$p" -U postgres -d template1 -c \
            "SELECT string_agg(proname, '|' ORDER BY proname) FROM pg_proc
              WHERE pronamespace = 'changefeed'::regnamespace AND prosecdef")
        allowed_rows[opr_sanity]="^[0-9]+ \\| (${secdef:-none})\$"
        load=(--load-extension=changefeed)
    fi
    # As the server's user: the server writes COPY output into the results folder.
    as_postgres "$pg_regress" --inputdir="$regress_src" --outputdir="$dir/out" \
        --bindir="$PGBIN" --dlpath="$scratch/lib" --host="$dir/cluster" --port="$p" --user=postgres \
        --schedule="$regress_src/parallel_schedule" --max-concurrent-tests=20 "${load[@]}" \
        >"$dir/pg_regress.log" 2>&1 || true
    bash test/cluster.sh stop "$dir/cluster"
    # name -> ok | FAILED (failed and ignored tests count as failed)
    sed -nE 's/^(test |ignored )?[[:space:]]*([A-Za-z0-9_.]+)[[:space:]]+\.\.\. (ok|FAILED|failed).*/\2 \3/p' \
        "$dir/pg_regress.log" | sed 's/ failed$/ FAILED/' >"$dir/status"
    echo "   $name: $(grep -c ' ok$' "$dir/status") ok, $(grep -c ' FAILED$' "$dir/status") failed ($(elapsed "$t"))"
    if [ ! -s "$dir/status" ]; then
        echo "core-regress.sh: the $name run ran no test:" >&2
        tail -30 "$dir/pg_regress.log" >&2
        exit 2
    fi
}
run_suite plain "$port" --no-preload
# Default settings: the suite enables no table, so no notifier (and none of
# its periodic maintenance) ever starts.
# The suite's publication test makes publications FOR ALL TABLES, which the
# extension refuses by design (CF024, guard/publications.sql): with the guard
# off that test runs as it does without the extension.
run_suite extension "$((port + 1))" --conf "changefeed.publication_guard = off"

compare_runs
