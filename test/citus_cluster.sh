#!/usr/bin/env bash
# A throwaway Citus cluster for tests: a coordinator and two workers, each a
# test/cluster.sh cluster with Citus and changefeed preloaded, on sockets in
# DIR/coordinator, DIR/worker1 and DIR/worker2 (ports BASE, BASE+1, BASE+2).
# Citus is built from ../shared/vendor and cached (test/support/citus.sh).
#
#   test/citus_cluster.sh start DIR [--port-base N]   # started, the workers added,
#                                  # changefeed created on every node
#   test/citus_cluster.sh add DIR --port N            # one more worker (worker3, ...), added
#   test/citus_cluster.sh stop DIR [--immediate]
#   test/citus_cluster.sh env DIR [NODE]              # PG* exports of the coordinator, or of NODE
#                                                    # (coordinator, worker1, worker2)
# PGBIN names the PostgreSQL binaries, as for test/cluster.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
export PGBIN
source test/support/stage.sh
source test/support/citus.sh

cmd=${1:?usage: citus_cluster.sh start|add|stop|env DIR}
dir=$(realpath -m "${2:?cluster directory required}")
shift 2
nodes=(coordinator worker1 worker2)
for n in "$dir"/worker*; do  # workers added since start
    if [ -f "$n/port" ] && [[ " ${nodes[*]} " != *" $(basename "$n") "* ]]; then nodes+=("$(basename "$n")"); fi
done

on() {  # on NODE SQL: runs SQL on NODE as postgres, quietly, stopping at the first error
    "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir/$1" -p "$(cat "$dir/$1/port")" -U postgres -d postgres -c "$2" >/dev/null
}

# start_node NAME PORT: a node with Citus and changefeed preloaded, Citus created.
start_node() {
    # Logical replication moves shards without blocking writes; the prepared
    # transactions are Citus's two-phase commits; a node reaches itself (a
    # shard move's local steps) on its own socket, not TCP.
    bash test/cluster.sh start "$dir/$1" --port "$2" --fsync-off \
        --conf "shared_preload_libraries = 'citus,changefeed'" \
        --conf "wal_level = logical" --conf "max_prepared_transactions = 100" \
        --conf "max_replication_slots = 20" --conf "max_wal_senders = 20" \
        --conf "citus.local_hostname = '$dir/$1'" --conf "changefeed.maintain_interval = 0"
    on "$1" "CREATE EXTENSION citus"
}

case "$cmd" in
start)
    port_base=55540
    parse_options citus_cluster.sh --port-base=port_base -- "$@"
    # CITUS_PG_CONFIG and CITUS_INTO build against one installation and install into a copy of it.
    citus_install "${CITUS_PG_CONFIG:-$PGBIN/pg_config}" "${CITUS_INTO:-/}"
    mkdir -p "$dir"
    chmod 755 "$dir"
    for i in 0 1 2; do
        start_node "${nodes[$i]}" $((port_base + i))
    done
    on coordinator "SELECT citus_set_coordinator_host('$dir/coordinator', $port_base)"
    on coordinator "SELECT citus_add_node('$dir/worker1', $((port_base + 1)))"
    on coordinator "SELECT citus_add_node('$dir/worker2', $((port_base + 2)))"
    # Created on the coordinator, propagated to every worker.
    on coordinator "CREATE EXTENSION changefeed"
    ;;
add)
    port=
    parse_options citus_cluster.sh --port=port -- "$@"
    name=worker$((${#nodes[@]}))
    start_node "$name" "${port:?citus_cluster.sh add: --port required}"
    # Citus makes the node's copies of the tables and changefeed there.
    on coordinator "SELECT citus_add_node('$dir/$name', $port)"
    echo "$name"
    ;;
stop)
    for n in "${nodes[@]}"; do
        [ -f "$dir/$n/data/postmaster.pid" ] && bash test/cluster.sh stop "$dir/$n" "$@" || true
    done
    ;;
env)
    bash test/cluster.sh env "$dir/${1:-coordinator}"
    ;;
*)
    echo "citus_cluster.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
