#!/usr/bin/env bash
# Turns $BENCH_OUT/raw.tsv into bench/RESULTS.md (medians and ratios of one
# run) and bench/results.png (ratios to the baseline of each part).
#   bash bench/report.sh RESULTS.md results.png
set -euo pipefail
source "$(dirname "$0")/lib.sh"
md=${1:-$BENCH_ROOT/bench/RESULTS.md} png=${2:-$BENCH_ROOT/bench/results.png}
raw=$BENCH_OUT/raw.tsv

# Medians per part/variant/case: part variant case median unit
# (values sorted by sort(1) first: mawk has no asort)
awk -F'\t' -v OFS='\t' '{print NR, $0}' "$raw" | sort -t$'\t' -k2,2 -k3,3 -k4,4 -k6,6g \
    | awk -F'\t' '{k=$2 FS $3 FS $4; n[k]++; a[k, n[k]]=$6; u[k]=$7; if (!(k in first) || $1 < first[k]) first[k]=$1}
        END {for (k in n) print first[k] FS k FS a[k, int((n[k]+1)/2)] FS u[k] FS n[k]}' \
    | sort -t$'\t' -k1,1n | cut -f2- >"$BENCH_OUT/medians.tsv"

# ratio_rows PART BASE FORMAT: a table row per variant of PART, in the order
# measured: its median and its ratio to variant BASE (printed with FORMAT).
ratio_rows() {
    awk -F'\t' -v part="$1" -v base="$2" -v ratio="$3" '$1 == part {m[$2] = $4; o[++n] = $2}
        END {b = m[base]; for (i = 1; i <= n; i++) printf "| %s | %.0f | " ratio "x |\n", o[i], m[o[i]], (b > 0 ? m[o[i]] / b : 0)}' \
        "$BENCH_OUT/medians.tsv"
}

{
    echo "# Benchmark results"
    echo
    echo "Produced by \`bash bench/run.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB,"
    echo "PostgreSQL $(/usr/lib/postgresql/15/bin/postgres --version | awk '{print $3}'). Every figure is a median of the"
    echo "rounds of this one run; every ratio compares variants measured side by side, interleaved in rounds."
    echo
    echo "## Write overhead (TPS, ratio to no capture on the same cluster)"
    echo
    echo "| case | variant | TPS | ratio |"
    echo "|---|---|---:|---:|"
    awk -F'\t' '$1 == "write" {
        base = ($2 ~ /no-preload/) ? "none-no-preload" : "none"
        m[$2 FS $3] = $4; rows[++n] = $2 FS $3; basek[n] = base FS $3 }
        END {for (i = 1; i <= n; i++) {split(rows[i], r, FS); b = m[basek[i]];
            if (r[1] ~ /^none/) continue;
            printf "| %s | %s | %.0f | %.3fx |\n", r[2], r[1], m[rows[i]], (b > 0 ? m[rows[i]] / b : 0)}}' \
        "$BENCH_OUT/medians.tsv" | sort
    echo
    echo "## Bulk statements (s, commit included; ratio to the same statement without capture)"
    echo
    echo "One statement over N rows of ~200-byte jsonb documents (\`bench/bulk_writes.sh\`); a DELETE is also"
    echo "compared with the plain INSERT of the same rows (writing every previous image once is its floor)."
    echo
    echo "| statement | variant | s | ratio to plain | ratio to plain INSERT | WAL bytes a row |"
    echo "|---|---|---:|---:|---:|---:|"
    awk -F'\t' '$1 == "bulk_wal" {w[$2 FS $3] = $4}
        $1 == "bulk" {m[$2 FS $3] = $4; if (!($3 in s)) {s[$3]; ops[++no] = $3}; if (!($2 in v)) {v[$2]; vars[++nv] = $2}}
        END {for (i = 1; i <= no; i++) for (j = 1; j <= nv; j++) {k = vars[j] FS ops[i]; if (!(k in m)) continue
            b = m["none" FS ops[i]]; bi = m["none" FS "insert"]
            printf "| %s | %s | %.3f | %s | %s | %s |\n", ops[i], vars[j], m[k], (b > 0 ? sprintf("%.2fx", m[k] / b) : "-"),
                (ops[i] == "delete" && bi > 0 ? sprintf("%.2fx", m[k] / bi) : ""), (k in w ? w[k] : "-")}}' "$BENCH_OUT/medians.tsv"
    echo
    echo "## TPC-B (pgbench's built-in transaction, synchronous_commit on; TPS, ratio to no capture)"
    echo
    echo "Each variant in a database of its own on one cluster (\`bench/tpcb.sh\`); changefeed and PgQ capture"
    echo "pgbench_accounts, pgbench_tellers and pgbench_branches (pgbench_history has no primary key)."
    echo
    echo "Logical decoding twice: wal2json at the default replica identity, and wal2json_full at REPLICA"
    echo "IDENTITY FULL (the old row in WAL: the peer of changefeed's images before and after). WAL a"
    echo "transaction: all of it, and its records without the full-page images that the first write of each"
    echo "page after the round's CHECKPOINT adds."
    echo
    echo "| variant | TPS | ratio to no capture | ratio to wal2json_full | WAL bytes a transaction | without page images |"
    echo "|---|---:|---:|---:|---:|---:|"
    awk -F'\t' '$1 == "tpcb_wal" {w[$2 FS $3] = $4}
        $1 == "tpcb" {m[$2] = $4; o[++n] = $2}
        END {b = m["none"]; f = m["wal2json_full"]
            for (i = 1; i <= n; i++) printf "| %s | %.0f | %.3fx | %s | %s | %s |\n", o[i], m[o[i]],
                (b > 0 ? m[o[i]] / b : 0), (f > 0 ? sprintf("%.3fx", m[o[i]] / f) : "-"),
                w[o[i] FS "all"], w[o[i] FS "records"]}' "$BENCH_OUT/medians.tsv"
    awk -F'\t' '$1 == "tpcb" {print ""; print "Measured at " $3 "."; exit}' "$BENCH_OUT/medians.tsv"
    echo
    echo "## Commit-to-handler latency (ms, ratio to the INSERT + NOTIFY floor at the same rate)"
    echo
    echo "Floor: INSERT + NOTIFY (the row's id) in one transaction, LISTEN on a bare connection, nothing read."
    echo
    echo "| rate (tx/s) | variant | achieved tx/s | p50 | p95 | p99 | p50 / floor | p99 / floor |"
    echo "|---:|---|---:|---:|---:|---:|---:|---:|"
    # Cases are "RATE/s p50" etc.
    awk -F'\t' '$1 == "latency" {split($3, c, " "); r = c[1]; sub("/s$", "", r); k = r FS $2
            m[k FS c[2]] = $4; if (!(k in seen)) {seen[k]; o[++n] = k}}
        END {for (i = 1; i <= n; i++) {split(o[i], kv, FS); f = kv[1] FS "floor"
            f50 = m[f FS "p50"]; f99 = m[f FS "p99"]
            printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", kv[1], kv[2], m[o[i] FS "achieved"],
                m[o[i] FS "p50"], m[o[i] FS "p95"], m[o[i] FS "p99"],
                (f50 > 0 ? sprintf("%.2fx", m[o[i] FS "p50"] / f50) : "-"),
                (f99 > 0 ? sprintf("%.2fx", m[o[i] FS "p99"] / f99) : "-")}}' \
        "$BENCH_OUT/medians.tsv" | sort -t'|' -k2,2n -s
    echo
    echo "## Consumer throughput (changes/s, ratio to a raw COPY of the log rows)"
    echo
    echo "| variant | changes/s | ratio to raw COPY |"
    echo "|---|---:|---:|"
    # Each variant against the raw COPY of the same backlog (same transaction size).
    awk -F'\t' '$1 == "throughput" {m[$2] = $4; o[++n] = $2}
        END {for (i = 1; i <= n; i++) {
                 suf = match(o[i], / \([0-9]+-row tx\)$/) ? substr(o[i], RSTART) : ""
                 b = m["raw COPY of the log" suf]
                 printf "| %s | %.0f | %.2fx |\n", o[i], m[o[i]], (b > 0 ? m[o[i]] / b : 0)}}' \
        "$BENCH_OUT/medians.tsv"
    echo
    echo "## Drain under an old open transaction (changes/s, ratio to the same drain alone)"
    echo
    echo "| variant | changes/s | ratio to alone |"
    echo "|---|---:|---:|"
    ratio_rows open_xact alone %.2f
    echo
    echo "## Drain under row-level security (changes/s of a non-superuser processor, ratio to no policy)"
    echo
    echo "| policy (passing every row) | changes/s | ratio to no policy |"
    echo "|---|---:|---:|"
    ratio_rows rls_drain whole %.2f
    echo
    echo "## Read cost and the log's size (changes/s of one drain, ratio to an empty log)"
    echo
    echo "| log holds besides the drained collection | changes/s | ratio to an empty log |"
    echo "|---|---:|---:|"
    ratio_rows log_size "empty log" %.3f
    echo
    echo "## Retention (ms, commit included)"
    echo
    echo "| rows | changefeed.prune (DROP) | DELETE | DELETE / prune |"
    echo "|---:|---:|---:|---:|"
    awk -F'\t' '$1 == "prune" {m[$2 FS $3] = $4; if (!($3 in s)) {s[$3]; o[++n] = $3}}
        END {for (i = 1; i <= n; i++) {p = m["changefeed.prune (DROP)" FS o[i]]; d = m["DELETE" FS o[i]];
            printf "| %s | %.1f | %.1f | %.1fx |\n", o[i], p, d, (p > 0 ? d / p : 0)}}' "$BENCH_OUT/medians.tsv"
    echo
    echo "## Bridge into NATS JetStream (changes/s, ratio to a raw publisher loop of the same envelopes)"
    echo
    echo "| variant | changes/s | ratio to the raw loop |"
    echo "|---|---:|---:|"
    awk -F'\t' '$1 == "bridge" {m[$2] = $4; o[++n] = $2}
        END {b = m["raw publisher loop"]; for (i = 1; i <= n; i++) printf "| %s | %.0f | %.2fx |\n", o[i], m[o[i]], (b > 0 ? m[o[i]] / b : 0)}' \
        "$BENCH_OUT/medians.tsv"
    echo
    echo "## Read scale-out (a drain through a hot standby vs through the primary)"
    echo
    echo "One processor (leases and checkpoints on the primary) drains the backlog reading the primary, then one"
    echo 'reading an asynchronous standby (`read_connection`). CPU: seconds of the servers'"'"' processes during the drain.'
    echo
    echo "| variant | changes/s | primary CPU (s) | standby CPU (s) | primary CPU, ratio to reading the primary |"
    echo "|---|---:|---:|---:|---:|"
    awk -F'\t' '$1 == "readscale" {m[$2 FS $3] = $4; if (!($2 in s)) {s[$2]; o[++n] = $2}}
        END {b = m["drain via the primary" FS "primary cpu"]; for (i = 1; i <= n; i++) {c = m[o[i] FS "primary cpu"]
            printf "| %s | %.0f | %.2f | %.2f | %s |\n", o[i], m[o[i] FS "drain"], c, m[o[i] FS "standby cpu"],
                (b > 0 ? sprintf("%.2fx", c / b) : "-")}}' "$BENCH_OUT/medians.tsv"
    echo
    echo "## Fan-out (ms until every hot subscription of a process saw one write, ratio to the fewest)"
    echo
    echo "One process holds both sets, half of each filtered (\`bench/fanout.sh\`); one write to each set in turn, 50 ms apart."
    echo
    echo "| subscriptions | ms | ratio |"
    echo "|---:|---:|---:|"
    awk -F'\t' '$1 == "fanout" {m[$2] = $4; o[++n] = $2}
        END {b = m[o[1]]; for (i = 1; i <= n; i++) printf "| %s | %.1f | %.1fx |\n", o[i], m[o[i]], (b > 0 ? m[o[i]] / b : 0)}' \
        "$BENCH_OUT/medians.tsv"
    echo
    echo "## Fan-out under row-level security (ms until every subscription saw one write)"
    echo
    echo "One process holds both sets, each of non-superuser readers on a table of its own with the same policies, half of"
    echo "each set filtered (\`bench/rls_fanout.sh\`); one write of a row both may see to each set in turn, 50 ms apart."
    echo
    echo "| subscriptions | ms | ratio to unrestricted |"
    echo "|---|---:|---:|"
    awk -F'\t' '$1 == "rls_fanout" {m[$2] = $4; o[++n] = $2; if ($2 ~ /unrestricted/) b = $4}
        END {for (i = 1; i <= n; i++) printf "| %s | %.1f | %.2fx |\n", o[i], m[o[i]], (b > 0 ? m[o[i]] / b : 0)}' \
        "$BENCH_OUT/medians.tsv"
    echo
    bash "$(dirname "$0")/report_ranges.sh"
    bash "$(dirname "$0")/report_scale.sh"
} >"$md"

# Chart: write-overhead ratios per case and variant.
awk -F'\t' '$1 == "write" {m[$2 FS $3] = $4; if (!($3 in c)) {c[$3]; cases[++nc] = $3}; if (!($2 in v)) {v[$2]; vars[++nv] = $2}}
    END {printf "case"; for (j = 1; j <= nv; j++) if (vars[j] !~ /^none/) printf "\t\"%s\"", vars[j]; printf "\n";
         for (i = 1; i <= nc; i++) {printf "\"%s\"", cases[i];
            for (j = 1; j <= nv; j++) if (vars[j] !~ /^none/) {b = m[(vars[j] ~ /no-preload/ ? "none-no-preload" : "none") FS cases[i]];
                printf "\t%.3f", (b > 0 ? m[vars[j] FS cases[i]] / b : 0)}; printf "\n"}}' \
    "$BENCH_OUT/medians.tsv" >"$BENCH_OUT/write_ratios.dat"
if command -v gnuplot >/dev/null && [ "$(wc -l <"$BENCH_OUT/write_ratios.dat")" -gt 1 ]; then
    ncol=$(head -1 "$BENCH_OUT/write_ratios.dat" | awk -F'\t' '{print NF}')
    gnuplot <<GP
set terminal pngcairo size 1000,560 font ",10"
set output "$png"
set title "Write throughput with capture, ratio to the same table without capture (higher is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set yrange [0:1.1]
set ylabel "TPS ratio"
set key outside right top
set grid ytics
set datafile separator "\t"
plot for [i=2:$ncol] "$BENCH_OUT/write_ratios.dat" using i:xtic(1) title columnheader(i)
GP
fi
# Chart: changefeed latency beside the floor, per rate.
lat_png=$(dirname "$png")/latency.png
awk -F'\t' '$1 == "latency" && ($2 == "floor" || $2 == "changefeed") {split($3, c, " "); r = c[1]; sub("/s$", "", r)
        m[r FS $2 FS c[2]] = $4; if (!(r in s)) {s[r]; o[++n] = r}}
    END {print "rate\t\"floor p50\"\t\"changefeed p50\"\t\"floor p99\"\t\"changefeed p99\"";
         for (i = 1; i <= n; i++) printf "\"%s tx/s\"\t%s\t%s\t%s\t%s\n", o[i], m[o[i] FS "floor" FS "p50"],
             m[o[i] FS "changefeed" FS "p50"], m[o[i] FS "floor" FS "p99"], m[o[i] FS "changefeed" FS "p99"]}' \
    "$BENCH_OUT/medians.tsv" >"$BENCH_OUT/latency.dat"
if command -v gnuplot >/dev/null && [ "$(wc -l <"$BENCH_OUT/latency.dat")" -gt 1 ]; then
    gnuplot <<GP
set terminal pngcairo size 800,480 font ",10"
set output "$lat_png"
set title "Commit-to-handler latency: changefeed beside the INSERT + NOTIFY floor (ms, lower is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set yrange [0:*]
set ylabel "ms"
set key outside right top
set grid ytics
set datafile separator "\t"
plot for [i=2:5] "$BENCH_OUT/latency.dat" using i:xtic(1) title columnheader(i)
GP
fi
echo "wrote $md${png:+ and $png}${lat_png:+ and $lat_png}"
