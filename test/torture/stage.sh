# What the torture stages (test/torture/run.sh, test/consumer_faults/run.sh)
# share: their common options, the programs, the cluster folder, the clean-up
# and the faults they both inject.  Sourced from the repository's root after
# `set -euo pipefail`, with SCRIPT naming the stage in its messages.
source test/support/stage.sh

# The options both stages take, for parse_options (their defaults: the
# stage's own).
torture_options=(--short=mode:short --long=mode:long --changes=changes --rate=rate
                 --port=port --dir=dir --build-dir=build_dir --no-build=build:0 --keep=keep:1)

# torture_programs: with build=1 builds and installs the extension and builds
# the torture programs; sets writer_bin and consumer_bin.
torture_programs() {
    if [ "$build" = 1 ]; then
        echo "== building the extension and the torture programs"
        make -s >/dev/null
        make -s install >/dev/null
        cmake_targets "$build_dir" torture_writer torture_consumer
    fi
    writer_bin=$(built_program "$SCRIPT" "$build_dir" torture_writer)
    consumer_bin=$(built_program "$SCRIPT" "$build_dir" torture_consumer)
}

# torture_dir: dir (--dir, or a fresh /tmp folder the stage owns: own_dir=1).
torture_dir() {
    own_dir=0
    [ -n "$dir" ] || { dir=$(mktemp -d "/tmp/changefeed-$1.XXXXXX"); own_dir=1; }
    status=
}

# torture_cleanup (on exit): stops the consumers (frozen ones resumed first)
# and their supervisors; unless --keep, stops the cluster and, after a
# passing run, removes a folder of its own (a failing one keeps its data and
# logs).
sup_pids=()
torture_cleanup() {
    touch "$work/stop"
    local f p
    for f in "$work"/*.pid; do
        [ -f "$f" ] || continue
        kill -CONT "$(cat "$f")" 2>/dev/null || true
        kill -TERM "$(cat "$f")" 2>/dev/null || true
    done
    for p in "${sup_pids[@]+"${sup_pids[@]}"}"; do wait "$p" 2>/dev/null || true; done
    if [ "$keep" = 0 ]; then
        bash test/cluster.sh stop "$dir" --immediate >/dev/null 2>&1 || true
        if [ "$own_dir" = 1 ] && [ "$status" = PASS ]; then rm -rf "$dir"; fi
    fi
}

# wait_for_leases COUNT PROCESSOR...: waits until the processors hold leases
# on COUNT (processor, table) pairs: a processor starts from the position of
# its first start, so the writers wait for it.
wait_for_leases() {
    local want=$1 names i n
    shift
    names=$(printf "'%s'," "$@")
    for i in $(seq 120); do
        n=$(psql -qXAt -c "SELECT count(DISTINCT (processor, table_name)) FROM changefeed.leases
                           WHERE processor IN (${names%,})")
        [ "$n" = "$want" ] && return 0
        sleep 0.5
    done
    echo "$SCRIPT: the consumers did not start; see $work/*.log" >&2
    exit 1
}

# terminate_consumer_backends: terminates two of the consumers' connections
# (readers, recorders, lease keepers, listeners); prints how many.
terminate_consumer_backends() {
    psql -qXAt -c "SELECT count(pg_terminate_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
                   WHERE application_name = 'torture_consumer' ORDER BY random() LIMIT 2) s" 2>/dev/null || echo 0
}
