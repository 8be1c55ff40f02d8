#!/usr/bin/env bash
# Demo of the example service on a throwaway cluster: builds and installs the
# extension and the client, starts a cluster, runs print_changes (a
# latest-version processor) while a few writes happen, then cleans up.
#   bash client/examples/demo.sh [--port N]      (as root on Debian 12)
set -euo pipefail
cd "$(dirname "$0")/../.."
port=55530
[ "${1:-}" = --port ] && port=$2

make -s >/dev/null && make -s install >/dev/null
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target print_changes >/dev/null

dir=$(mktemp -d /tmp/changefeed-demo.XXXXXX)
chmod 755 "$dir"
cleanup() { bash test/cluster.sh stop "$dir/pg" --immediate >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT
bash test/cluster.sh start "$dir/pg" --port "$port" --fsync-off
eval "$(bash test/cluster.sh env "$dir/pg")"
conninfo="host=$PGHOST port=$PGPORT user=postgres dbname=postgres"

psql -qX -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION changefeed;
CREATE TABLE users (id int PRIMARY KEY, name text, deleted bool NOT NULL DEFAULT false);
SELECT changefeed.enable('users') AS collection_id;
INSERT INTO users VALUES (1, 'existing before the processor started');
SQL

# Expect 3 changes: ada (created then renamed: once, carrying the rename),
# grace (soft-deleted: on the feed), and linus. The hard-deleted row and the
# row written before the first start are not on the latest-version feed.
build/print_changes "$conninfo" public.users --count 3 --timeout 30 &
service=$!
sleep 2
psql -qX -v ON_ERROR_STOP=1 <<'SQL'
BEGIN;
INSERT INTO users VALUES (2, 'ada');
UPDATE users SET name = 'ada lovelace' WHERE id = 2;
COMMIT;
BEGIN;
INSERT INTO users VALUES (3, 'grace');
UPDATE users SET deleted = true WHERE id = 3;
COMMIT;
BEGIN;
INSERT INTO users VALUES (4, 'temporary');
DELETE FROM users WHERE id = 4;
COMMIT;
INSERT INTO users VALUES (5, 'linus');
SQL
wait "$service"
