#!/usr/bin/env bash
# The SQL blocks the docs promise to run as written: every ```sql block that
# follows a "<!-- doc-test: runs as written -->" line in README.md and
# docs/*.md, run whole by psql (stopping at the first error) as a superuser
# on a cluster of its own, so that its CREATE ROLE and SET ROLE lines make it
# run as the roles it names.  A doc whose SQL does not run fails here.
#
#   bash test/stages/docs_sql.sh [--port N]   (needs the extension installed)
set -euo pipefail
cd "$(dirname "$0")/../.."
port=55482
[ "${1:-}" = --port ] && port=$2

dir=$(mktemp -d /tmp/changefeed-docs-sql.XXXXXX)
chmod 755 "$dir"
trap 'bash test/cluster.sh stop "$dir/cluster" --immediate >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT

# Writes each marked block to $dir/block-N.sql with a first line naming where it is.
python3 - "$dir" README.md docs/*.md <<'PY'
import sys
out, files = sys.argv[1], sys.argv[2:]
n = 0
for path in files:
    lines = open(path, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        if line.strip() != "<!-- doc-test: runs as written -->":
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```sql":
            sys.exit(f"{path}:{i + 1}: the doc-test mark must stand right above a ```sql block")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            sys.exit(f"{path}:{i + 2}: the ```sql block never ends")
        n += 1
        with open(f"{out}/block-{n}.sql", "w", encoding="utf-8") as f:
            f.write(f"-- {path}:{i + 3}\n" + "\n".join(lines[i + 2:end]) + "\n")
if n == 0:
    sys.exit("no doc-test blocks found")
PY

failed=0
for block in "$dir"/block-*.sql; do
    where=$(head -1 "$block" | cut -c4-)
    bash test/cluster.sh start "$dir/cluster" --port "$port" --fsync-off \
        --conf "changefeed.maintain_interval = 0" >/dev/null
    eval "$(bash test/cluster.sh env "$dir/cluster")"
    if out=$(psql -X -q -v ON_ERROR_STOP=1 -f "$block" 2>&1); then
        echo "ok   $where"
    else
        echo "FAIL $where:"
        echo "$out" | sed 's/^/     /'
        failed=1
    fi
    bash test/cluster.sh stop "$dir/cluster" --immediate >/dev/null 2>&1 || true
    rm -rf "$dir/cluster"
done
exit $failed
