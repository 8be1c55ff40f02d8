#!/usr/bin/env bash
# The "Many ranges" section of RESULTS.md, from $BENCH_OUT/medians.tsv
# (report.sh computes the medians and calls this).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
med=$BENCH_OUT/medians.tsv
grep -q '^ranges	' "$med" || exit 0
echo "## Many ranges (4 instances of one all-versions processor; acquire 500 ms, lease 4 s)"
echo
echo "| ranges | burst: all changes handled (s) | even split after starting 4 (ms) | after adding a 5th (ms) | idle instance CPU, client (ms) | idle, its server sessions (ms) |"
echo "|---:|---:|---:|---:|---:|---:|"
awk -F'\t' '$1 == "ranges" {m[$2 FS $3] = $4; u[$2] = $5; if (!($3 in s)) {s[$3]; o[++n] = $3}}
    END {for (i = 1; i <= n; i++) {r = o[i];
        printf "| %s | %.3f | %.0f | %.0f | %.0f | %.0f |\n", r, m["burst" FS r], m["split-start" FS r],
            m["split-join" FS r], m["idle-client" FS r], m["idle-server" FS r]}
        lo = o[1]; hi = o[n];
        if (n > 1 && m["burst" FS lo] > 0)
            printf "\nBurst %s vs %s ranges: %.2fx.  Idle CPU (client + server, %s) %s vs %s ranges: %.2fx.\n",
                hi, lo, m["burst" FS hi] / m["burst" FS lo], u["idle-client"], hi, lo,
                (m["idle-client" FS hi] + m["idle-server" FS hi]) / (m["idle-client" FS lo] + m["idle-server" FS lo] + 1e-9)}' "$med"
echo
