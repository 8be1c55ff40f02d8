#!/usr/bin/env bash
# The main job on a throwaway local cluster: installs what it needs, builds and
# installs the extension and the client, starts a cluster with the library
# preloaded, enables a demo table, runs the example processor and writes to
# the table while it runs.  Least privilege throughout: the application role
# `app` owns and writes the table, the processor connects as `feed`, a
# changefeed_processor that may only SELECT it; neither is a superuser.  The processor polls only every 30 s, so changes
# that show up within milliseconds were brought by the notifier's NOTIFY.
# It ends by showing the processor's lag with the changefeed command-line tool.
# With --nats it then bridges the table to NATS JetStream: a nats-server
# started in the demo's folder, the example bridge
# (client/examples/bridge_to_nats.cpp) publishing each change with its event id
# as Nats-Msg-Id, and the messages read back from the stream.
# Usage (as root on Debian 12): bash test/demo.sh [--nats]
set -euo pipefail
cd "$(dirname "$0")/.."
nats=no
for arg in "$@"; do
    case "$arg" in
        --nats) nats=yes ;;
        *) echo "usage: bash test/demo.sh [--nats]" >&2; exit 2 ;;
    esac
done

bash test/install-deps.sh
echo "== building and installing the extension"
make -s
make -s install >/dev/null
echo "== building the client, its example and the changefeed command-line tool"
cmake -S . -B build-demo -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHANGEFEED_BUILD_TESTS=OFF -DCHANGEFEED_BUILD_EXAMPLES=ON >/dev/null
cmake --build build-demo -j2 --target print_changes changefeed_cli >/dev/null
[ "$nats" = yes ] && cmake --build build-demo -j2 --target bridge_to_nats >/dev/null

dir=/tmp/changefeed-demo
echo "== starting a throwaway cluster in $dir"
bash test/cluster.sh start "$dir" --port 55480
nats_pid=
cleanup() {
    # nats-server exits non-zero on SIGTERM: that must not become the demo's status.
    if [ -n "$nats_pid" ]; then kill "$nats_pid" 2>/dev/null && wait "$nats_pid" 2>/dev/null || true; fi
    bash test/cluster.sh stop "$dir" >/dev/null 2>&1 || true
}
trap cleanup EXIT
eval "$(bash test/cluster.sh env "$dir")"
conninfo="host=$PGHOST port=$PGPORT user=feed dbname=postgres"

psql -qX <<'SQL'
CREATE EXTENSION changefeed;
CREATE ROLE app LOGIN IN ROLE changefeed_reader;    -- owns and writes the table
CREATE ROLE feed LOGIN IN ROLE changefeed_processor; -- runs the processor
GRANT CREATE ON SCHEMA public TO app;
SET ROLE app;
CREATE TABLE users (id int PRIMARY KEY, name text NOT NULL, email text, deleted bool NOT NULL DEFAULT false);
SELECT changefeed.enable('users');
GRANT SELECT ON users TO feed;
SQL

echo "== starting the example processor (latest-version feed)"
out=$dir/processor.out
./build-demo/print_changes "$conninfo" users --name demo --count 5 --timeout 60 --poll 30 \
    >"$out" 2>"$dir/processor.err" &
proc=$!
# Wait until the processor holds its leases (it then reports itself running).
for _ in $(seq 1 100); do
    grep -q "state: running" "$dir/processor.err" 2>/dev/null && break
    sleep 0.1
done

start=$(psql -qXAt -U feed -c "SELECT changefeed.current_position()")
echo "== writing to users as app"
write() {
    printf '%s  %s\n' "$(date +%T.%3N)" "$1"
    psql -qX -U app -c "$1"
    sleep 0.5
}
write "INSERT INTO users (id, name, email) VALUES (1, 'Ada', 'ada@example.com')"
write "INSERT INTO users (id, name, email) VALUES (2, 'Grace', 'grace@example.com')"
write "UPDATE users SET email = 'ada@lovelace.example' WHERE id = 1"
write "UPDATE users SET deleted = true WHERE id = 2"
write "INSERT INTO users (id, name) VALUES (3, 'Edsger')"

wait "$proc" && status=0 || status=$?
echo "== what the processor handled"
cat "$out"
echo "== what a plain SQL reader (feed) sees: every version since the writes began"
psql -qX -U feed -v pos="$start" <<'SQL'
SELECT seq, range_id, operation, doc_id, current ->> 'email' AS email, previous ->> 'email' AS was
  FROM changefeed.read('users', :'pos');
SQL
echo "== feed may read, not write"
psql -qX -U feed -c "UPDATE users SET name = 'x'" 2>&1 | sed 's/^/   /' || true
echo "== the extension's background workers"
psql -qX -c "SELECT pid, backend_type FROM pg_stat_activity WHERE backend_type LIKE 'changefeed %'"
echo "== changefeed lag users demo (the command-line tool, as feed: docs/cli.md)"
./build-demo/changefeed -U feed lag users demo
[ "$nats" = yes ] || exit "$status"

echo
echo "== NATS JetStream: starting nats-server -js in $dir/nats"
rm -rf "$dir/nats"
mkdir -p "$dir/nats"
nats-server -js -sd "$dir/nats/store" -a 127.0.0.1 -p 55481 -l "$dir/nats/nats.log" >/dev/null 2>&1 &
nats_pid=$!
for _ in $(seq 1 100); do
    (exec 3<>/dev/tcp/127.0.0.1/55481) 2>/dev/null && break
    sleep 0.1
done
echo "== starting the example bridge: users -> subject demo.public.users in stream DEMO"
./build-demo/bridge_to_nats "$conninfo" users nats://127.0.0.1:55481 --count 4 --timeout 60 \
    >"$dir/bridge.out" 2>"$dir/bridge.err" &
bridge=$!
for _ in $(seq 1 100); do
    grep -q "state: running" "$dir/bridge.err" 2>/dev/null && break
    sleep 0.1
done
echo "== writing to users as app"
write "INSERT INTO users (id, name, email) VALUES (4, 'Barbara', 'barbara@example.com')"
write "UPDATE users SET email = 'liskov@example.com' WHERE id = 4"
write "DELETE FROM users WHERE id = 3"
write "INSERT INTO users (id, name) VALUES (5, 'Niklaus')"
wait "$bridge" && bridge_status=0 || bridge_status=$?
echo "== what the bridge published, read back from the stream"
cat "$dir/bridge.out"
[ "$status" = 0 ] && exit "$bridge_status"
exit "$status"
