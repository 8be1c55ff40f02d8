#!/usr/bin/env bash
# An incremental build after touching a header rebuilds every object whose
# source includes it (directly or through another header), and nothing else.
# Checks extension/log/log_writer.hpp (included by some sources) and
# extension/pg.hpp (included by all but the pure position codec).
# Usage: bash test/stages/incremental_build.sh   (uses PG_CONFIG like the Makefile)
set -euo pipefail
cd "$(dirname "$0")/../.."

# Sources that include $1, directly or through an extension header.
dependants() {
    local header=$1 found=() h
    local headers=("$header")
    # An include names a header by its path from extension/ ("log/log_writer.hpp").
    for h in extension/*.hpp extension/*/*.hpp; do
        grep -q "#include \"${header#extension/}\"" "$h" && headers+=("$h")
    done
    for src in extension/*.cpp extension/*/*.cpp; do
        for h in "${headers[@]}"; do
            if grep -q "#include \"${h#extension/}\"" "$src"; then found+=("${src%.cpp}.o"); break; fi
        done
    done
    printf '%s\n' "${found[@]}" | sort -u
}

make -s >/dev/null
make -q || { echo "incremental build: tree not up to date after make" >&2; exit 1; }

failed=0
for header in extension/log/log_writer.hpp extension/pg.hpp; do
    expected=$(dependants "$header")
    touch "$header"
    # The objects make would compile now (-n: print, do not run).
    would=$(make -n 2>/dev/null | grep -o -- '-o extension/[a-z_/]*\.o' | sed 's/^-o //' | sort -u)
    make -s >/dev/null
    if [ "$would" != "$expected" ]; then
        echo "incremental build: after touching $header" >&2
        echo "  expected rebuilds: $(echo $expected)" >&2
        echo "  make would rebuild: $(echo $would)" >&2
        failed=1
    fi
    if ! make -q; then
        echo "incremental build: not up to date after rebuilding for $header" >&2
        failed=1
    fi
done
[ "$failed" -eq 0 ] && echo "incremental build: touching a header rebuilds exactly its dependants"
exit "$failed"
