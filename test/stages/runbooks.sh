#!/usr/bin/env bash
# Every runbook the code names exists under docs/runbooks/: a halt that points
# the operator to a missing page is as bad as one that names none.
set -euo pipefail
cd "$(dirname "$0")/../.."
missing=0 named=0
# halt(State::..., "name") in the client's sources, examples and docs, and
# docs/runbooks/<name>.md links anywhere.
names=$( { grep -rhoE 'halt\(([A-Za-z_:]*State::)?[a-z_]+, *"[a-z0-9-]+"\)' client docs README.md test bench 2>/dev/null |
             sed -E 's/.*"([a-z0-9-]+)"\)/\1/'
           grep -rhoE 'runbooks/[a-z0-9-]+\.md' client extension docs README.md 2>/dev/null |
             sed -E 's#runbooks/([a-z0-9-]+)\.md#\1#'; } | sort -u)
for n in $names; do
    named=$((named + 1))
    if [ ! -f "docs/runbooks/$n.md" ]; then
        echo "runbooks: \"$n\" is named but docs/runbooks/$n.md does not exist"
        missing=$((missing + 1))
    fi
done
[ "$named" -ge 4 ] || { echo "runbooks: found only $named runbook names; the scan is broken"; exit 1; }
echo "runbooks: $named named, $missing missing"
[ "$missing" -eq 0 ]
