#!/usr/bin/env bash
# The README's "Measured" section is printed from bench/RESULTS.md, the
# figures of the last `bash bench/run.sh`.  Fails when the README's section
# differs from what RESULTS.md gives (after a benchmark run, paste the new one).
# Usage: bash test/stages/measured.sh            check
#        bash test/stages/measured.sh --readme   print the section's body from bench/RESULTS.md
set -euo pipefail
cd "$(dirname "$0")/../.."
results=bench/RESULTS.md

# cell SECTION KEY COLUMN: the COLUMN-th cell (1-based) of the row of the
# table under the "## SECTION..." heading whose first cells read KEY
# ("a | b" for two cells).  Fails when there is no such row.
cell() {
    local v
    v=$(awk -v section="$1" -v key="$2" -v col="$3" '
        /^## / { on = index($0, "## " section) == 1; next }
        on && /^\|/ {
            line = $0; sub(/^\| */, "", line); sub(/ *\|$/, "", line)
            n = split(line, c, / *\| */)
            k = c[1]; for (i = 2; i <= n && length(k) < length(key); i++) k = k " | " c[i]
            if (k == key) { print c[col]; exit }
        }' "$results")
    [ -n "$v" ] || { echo "measured: no \"$2\" row under \"## $1\" in $results" >&2; exit 2; }
    echo "$v"
}
# The highest rate of the latency table.
top_rate() { awk '/^## Commit-to-handler/ { on = 1; next } /^## / { on = 0 } on && /^\| *[0-9]/ { split($0, c, / *\| */); r = c[2] } END { print r }' "$results"; }
thousands() { awk -v n="$1" 'BEGIN { printf "%.0fk", n / 1000 }'; }

section() {
    local w=Write r=$(top_rate) l=Commit-to-handler d="Consumer throughput" p=Retention t=TPC-B b="Bulk statements"
    local run
    run=$(sed -n 's/^Produced by `bash bench\/run.sh` on \([0-9-]*\), \([^,]*\),.*/\1, \2/p' "$results")
    # Write sections measured again alone, after the full run: say when.
    local again
    again=$(sed -n 's/^alone on \([0-9-]*\), on the same machine.*/, its write parts again on \1/p' "$results")
    cat <<EOF
From \`bench/RESULTS.md\` (one run of \`bash bench/run.sh\`, $run$again; medians of its rounds, ratios
of variants measured side by side; printed by \`bash test/stages/measured.sh --readme\`):

- Write overhead, pgbench, synchronous_commit on, TPS against the plain table: single-row update
  $(cell $w "update sync=on | changefeed" 4) (PgQ's trigger $(cell $w "update sync=on | pgq" 4), PL/pgSQL + NOTIFY $(cell $w "update sync=on | plpgsql-notify" 4), changefeed without preload
  $(cell $w "update sync=on | changefeed-no-preload" 4): NOTIFY's commit lock), insert $(cell $w "insert sync=on | changefeed" 4) (PgQ $(cell $w "insert sync=on | pgq" 4)). With
  synchronous_commit off: update $(cell $w "update sync=off | changefeed" 4), insert $(cell $w "insert sync=off | changefeed" 4).
- TPC-B (pgbench's transaction, synchronous_commit on): $(cell $t changefeed 3) of the TPS without capture (logical
  decoding with REPLICA IDENTITY FULL $(cell $t wal2json_full 3), with the default identity $(cell $t wal2json 3); PgQ $(cell $t pgq 3)). WAL a
  transaction without page images: $(cell $t changefeed 6) bytes (no capture $(cell $t none 6), logical decoding FULL $(cell $t wal2json_full 6)).
- Bulk statements over ~200-byte documents, time against the plain statement: \`INSERT ... SELECT\`
  $(cell "$b" "insert | changefeed" 4), \`UPDATE\` $(cell "$b" "update | changefeed" 4) (logical decoding FULL $(cell "$b" "insert | wal2json_full" 4) and $(cell "$b" "update | wal2json_full" 4)); \`DELETE\`
  $(cell "$b" "delete | changefeed" 5) of the plain \`INSERT\` of its rows.
- Commit-to-handler latency at $r transactions/s: p50 $(cell $l "$r | changefeed" 4) ms, p99 $(cell $l "$r | changefeed" 6) ms (INSERT + NOTIFY
  alone $(cell $l "$r | floor" 4) / $(cell $l "$r | floor" 6) ms; PgQ at its fastest tick $(cell $l "$r | pgq-pgqd-fastest" 4) / $(cell $l "$r | pgq-pgqd-fastest" 6) ms, at pgqd's defaults
  $(cell $l "$r | pgq-pgqd-default" 4) / $(cell $l "$r | pgq-pgqd-default" 6) ms; wal2json $(cell $l "$r | wal2json" 4) / $(cell $l "$r | wal2json" 6) ms).
- Draining a backlog: $(thousands "$(cell "$d" "changefeed x1, default options" 2)") changes/s with one processor instance and default options,
  $(thousands "$(cell "$d" "changefeed x2" 2)")/s with two (a raw COPY of the same log rows $(thousands "$(cell "$d" "raw COPY of the log" 2)")/s; PgQ batches $(thousands "$(cell "$d" "pgq" 2)")/s;
  wal2json $(thousands "$(cell "$d" "wal2json" 2)")/s).
- Retention: dropping a day of 1M changes takes $(cell $p "1000000 rows" 2) ms against $(cell $p "1000000 rows" 3) ms for \`DELETE\`
  (100k: $(cell $p "100000 rows" 2) vs $(cell $p "100000 rows" 3) ms; 10k: $(cell $p "10000 rows" 2) vs $(cell $p "10000 rows" 3) ms): prune time barely grows with the rows.
EOF
}
if [ "${1:-}" = --readme ]; then section; exit 0; fi

expected=$(section)
# The README's section: the lines after "## Measured" up to the next heading,
# without the blank lines around it.
readme=$(awk '/^## Measured/ { on = 1; next } on && /^#/ { exit } on' README.md | sed -e '/./,$!d' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}')
if [ "$readme" != "$expected" ]; then
    echo "measured: README.md's Measured section differs from $results:" >&2
    diff <(echo "$readme") <(echo "$expected") >&2 || true
    echo "(bash test/stages/measured.sh --readme prints the section to paste)" >&2
    exit 1
fi
echo "measured: README's Measured section agrees with $results"
