# Shared by the stage scripts that check a running PostgreSQL (test/stages/pitr.sh,
# test/stages/standby_read.sh, test/stages/dump_restore.sh, test/stages/upgrade.sh): sourced from
# the repository's root, after `set -euo pipefail`.

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
export PGBIN

source test/support/stage.sh

# debian_packages PACKAGE...: installs the Debian packages that are missing.
debian_packages() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# debian_extensions PACKAGE...: installs the Debian packages of PostgreSQL 15
# extensions when missing, and copies their files (library, extension
# scripts, programs) into the PostgreSQL of PG_CONFIG when that is not the
# system's: a private PostgreSQL loads extensions from its own folders.
debian_extensions() {
    local p f pg_config libdir extdir bindir
    debian_packages "$@"
    pg_config=${PG_CONFIG:-$PGBIN/pg_config}
    libdir=$("$pg_config" --pkglibdir) extdir=$("$pg_config" --sharedir)/extension bindir=$("$pg_config" --bindir)
    for p in "$@"; do
        dpkg -L "$p" | while read -r f; do
            [ -f "$f" ] || continue
            case "$f" in
                /usr/lib/postgresql/15/lib/*.so) [ "$libdir" = /usr/lib/postgresql/15/lib ] || cp "$f" "$libdir/" ;;
                /usr/lib/postgresql/15/bin/*) [ "$bindir" = /usr/lib/postgresql/15/bin ] || cp "$f" "$bindir/" ;;
                /usr/share/postgresql/15/extension/*)
                    [ "$extdir" = /usr/share/postgresql/15/extension ] || cp "$f" "$extdir/" ;;
            esac
        done
    done
}

# stage_options SCRIPT DEFAULT_PORT "$@": sets port (--port N) and keep
# (--keep); any other option is refused.
stage_options() {
    local script=$1
    port=$2 keep=0
    shift 2
    parse_options "$script" --port=port --keep=keep:1 -- "$@"
}

# stage_scratch NAME: a scratch folder /tmp/changefeed-NAME.XXXXXX in
# $scratch, readable by postgres.
stage_scratch() {
    scratch=$(mktemp -d "/tmp/changefeed-$1.XXXXXX")
    chmod 755 "$scratch"
}

# stage_cleanup CLUSTER_DIR...: stops the clusters still running (immediate)
# and removes the scratch folder unless --keep was given.
stage_cleanup() {
    local c
    for c in "$@"; do
        [ -f "$c/data/postmaster.pid" ] && bash test/cluster.sh stop "$c" --immediate >/dev/null 2>&1 || true
    done
    if [ "$keep" = 1 ]; then echo "kept $scratch"; else rm -rf "$scratch"; fi
}

as_postgres() { if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi; }

passed=0 failed=0
pass() { passed=$((passed + 1)); echo "ok   - $1"; }
fail() { failed=$((failed + 1)); echo "FAIL - $1"; [ -z "${2:-}" ] || sed 's/^/         /' <<<"$2"; }
# check NAME EXPECTED ACTUAL
check() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "expected: $2"$'\n'"got:      $3"; fi; }
# stage_summary: the last line, `N passed, M failed`; fails when a check did.
stage_summary() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}

# psql_try PSQL_ARGS...: prints "OK <rows>" or "<SQLSTATE> <message>"; never
# fails.
psql_try() {
    local out
    if out=$("$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -v VERBOSITY=verbose "$@" 2>&1); then
        echo "OK $out"
    else
        sed -nE '1s/^(psql:[^:]*:[0-9]+: )?ERROR:  ([0-9A-Z]{5}): /\2 /p' <<<"$out" | grep . || echo "?? $out"
    fi
}
