#!/usr/bin/env bash
# The "Scale" section of RESULTS.md, from $BENCH_OUT/medians.tsv
# (report.sh computes the medians and calls this).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
med=$BENCH_OUT/medians.tsv
grep -q '^scale	' "$med" || exit 0
echo "## Scale: processors under a sustained write rate"
echo
echo "Lag sampled every second: changes not yet handled (ids taken minus changes handled), and how far behind the"
echo "handlers ran (the oldest change handled in that second: handled - written_at)."
echo
echo "| processor | target changes/s | achieved changes/s | max lag (s) | p99 lag (s) | max pending | p99 pending |"
echo "|---|---:|---:|---:|---:|---:|---:|"
awk -F'\t' '$1 == "scale" && $3 ~ /pending|lag s|changes\/s/ {m[$2 FS $3] = $4; if (!($2 in s)) {s[$2]; o[++n] = $2}}
    END {for (i = 1; i <= n; i++) {v = o[i]
        printf "| %s | %.0f | %.0f | %.3f | %.3f | %.0f | %.0f |\n", v, m[v FS "target changes/s"], m[v FS "achieved changes/s"],
            m[v FS "max lag s"], m[v FS "p99 lag s"], m[v FS "max pending"], m[v FS "p99 pending"]}}' "$med"
echo
echo "## Scale: one notifier, many collections"
echo
echo "Commit-to-wake latency of a listener on 4 of the tables (first wake-up of the table's channel after the commit);"
echo "the age of the newest tick and the NOTIFY queue's usage sampled every second."
echo
echo "| tables | target tx/s | achieved tx/s | wake p50 (ms) | p95 | p99 | p99 first half | p99 second half | max tick age (s) | max NOTIFY queue usage |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
awk -F'\t' '$1 == "scale" && $3 ~ /wake|tick|queue|tx\/s/ {m[$2 FS $3] = $4; if (!($2 in s)) {s[$2]; o[++n] = $2}}
    END {for (i = 1; i <= n; i++) {v = o[i]
        printf "| %s | %.0f | %.0f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.6f |\n", v, m[v FS "target tx/s"], m[v FS "achieved tx/s"],
            m[v FS "wake p50 ms"], m[v FS "wake p95 ms"], m[v FS "wake p99 ms"], m[v FS "wake p99 first half ms"],
            m[v FS "wake p99 second half ms"], m[v FS "max tick age s"], m[v FS "max NOTIFY queue usage"]}}' "$med"
echo
