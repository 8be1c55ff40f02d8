#!/usr/bin/env bash
# Throwaway PostgreSQL clusters for tests, the demo and benchmarks: the host's
# PostgreSQL 15 unless PGBIN names another major's binaries (test/stages/matrix.sh
# runs 17 and 18 this way, inside Debian roots).
#
#   test/cluster.sh start DIR [--port N] [--no-preload] [--fsync-off] [--conf 'key = value']...
#   test/cluster.sh stop DIR [--immediate]
#   test/cluster.sh restart DIR [--immediate]
#   test/cluster.sh env DIR        # prints PGHOST/PGPORT/PGUSER exports
#   test/cluster.sh standby PRIMARY_DIR DIR [--port N]   # a streaming hot standby of a running
#                                  # cluster (pg_basebackup -R), started; its name is DIR's base name
#   test/cluster.sh promote DIR    # promotes a standby (waits until it takes writes)
#
# The cluster is initdb'd as the postgres user into DIR/data, listens only on
# a socket in DIR, and preloads changefeed unless --no-preload is given.
set -euo pipefail

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
source "$(dirname "$0")/support/stage.sh"

as_postgres() {
    if [ "$(id -un)" = postgres ]; then "$@"; else runuser -u postgres -- "$@"; fi
}

# fresh_dir DIR: DIR emptied (a server still running there stopped first)
# and owned by postgres.
fresh_dir() {
    if [ -f "$1/data/postmaster.pid" ]; then
        "$0" stop "$1" --immediate || true
    fi
    rm -rf "$1"
    mkdir -p "$1"
    chown postgres "$1" 2>/dev/null || true
}

cmd=${1:?usage: cluster.sh start|stop|restart|env|standby|promote DIR}
dir=${2:?cluster directory required}
shift 2
dir=$(realpath -m "$dir")

case "$cmd" in
start)
    port=55432 preload=changefeed fsync=on extra=()
    while [ $# -gt 0 ]; do
        case "$1" in
            --port) port=$2; shift ;;
            --no-preload) preload= ;;
            --fsync-off) fsync=off ;;
            --conf) extra+=("$2"); shift ;;
            *) echo "cluster.sh: unknown option $1" >&2; exit 2 ;;
        esac
        shift
    done
    fresh_dir "$dir"
    as_postgres "$PGBIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
    {
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir'"
        echo "port = $port"
        echo "shared_preload_libraries = '$preload'"
        echo "fsync = $fsync"
        echo "max_connections = 200"
        echo "max_worker_processes = 16"
        echo "max_prepared_transactions = 10"
        echo "log_min_messages = warning"
        for line in "${extra[@]+"${extra[@]}"}"; do echo "$line"; done
    } >>"$dir/data/postgresql.conf"
    echo "$port" >"$dir/port"
    as_postgres "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
    ;;
stop)
    mode=fast
    [ "${1:-}" = --immediate ] && mode=immediate
    as_postgres "$PGBIN/pg_ctl" -D "$dir/data" -m "$mode" -w -t 60 stop >/dev/null
    ;;
restart)
    mode=fast
    [ "${1:-}" = --immediate ] && mode=immediate
    as_postgres "$PGBIN/pg_ctl" -D "$dir/data" -m "$mode" -w -t 60 stop >/dev/null || true
    as_postgres "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null
    ;;
standby)
    # Here $dir is the primary's folder; the standby's comes next.
    sdir=$(realpath -m "${1:?standby directory required}")
    shift
    port=55433
    parse_options cluster.sh --port=port -- "$@"
    fresh_dir "$sdir"
    # -R writes primary_conninfo and standby.signal; the application name is
    # what synchronous_standby_names of the primary can name.
    as_postgres "$PGBIN/pg_basebackup" -h "$dir" -p "$(cat "$dir/port")" -U postgres -D "$sdir/data" \
        -R -X stream -c fast -d "application_name=$(basename "$sdir")" >"$sdir/basebackup.log" 2>&1
    {
        echo "unix_socket_directories = '$sdir'"
        echo "port = $port"
        # The primary's synchronous standbys are not this one's: promoted,
        # it must not wait for a standby it does not have.
        echo "synchronous_standby_names = ''"
    } >>"$sdir/data/postgresql.conf"
    echo "$port" >"$sdir/port"
    as_postgres "$PGBIN/pg_ctl" -D "$sdir/data" -l "$sdir/server.log" -w -t 60 start >/dev/null
    ;;
promote)
    as_postgres "$PGBIN/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
    ;;
env)
    echo "export PGHOST='$dir' PGPORT=$(cat "$dir/port") PGUSER=postgres PGDATABASE=postgres"
    ;;
*)
    echo "cluster.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
