#!/usr/bin/env bash
# Checks that every tracked C++ file (git ls-files '*.cpp' '*.hpp': the
# extension, the client, the tests and the benchmarks) is formatted as
# .clang-format says (with extension/.clang-format and client/.clang-format
# for their folders): `clang-format --dry-run --Werror` on each, changing
# nothing.  Prints `format: N files match .clang-format` when all do; else
# names each file that differs with the command that fixes it, and fails.
# Usage: bash test/stages/format.sh [file ...]
#   from any directory; files are paths from the repository root (default:
#   every tracked *.cpp and *.hpp); CLANG_FORMAT=/path/to/clang-format picks
#   the binary (default: clang-format from PATH).  The config is written for
#   clang-format 14 (Debian 12's); another version may format differently.
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
clang_format=${CLANG_FORMAT:-clang-format}
if ! command -v "$clang_format" >/dev/null 2>&1; then
    echo "format: $clang_format not found (install the Debian package clang-format, or set CLANG_FORMAT)" >&2
    exit 2
fi

files=("$@")
if [ ${#files[@]} -eq 0 ]; then
    mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
fi
[ ${#files[@]} -gt 0 ] || { echo "format: no C++ files found" >&2; exit 2; }

version=$("$clang_format" --version)
case $version in
*" version 14."*) ;;
*) echo "format: warning: the config is written for clang-format 14; $version may format differently" >&2 ;;
esac

differ=() broken=()
for f in "${files[@]}"; do
    if ! out=$("$clang_format" --dry-run --Werror "$f" 2>&1); then
        if grep -q 'Wclang-format-violations' <<<"$out"; then
            differ+=("$f")
        else
            broken+=("$f")
            echo "format: $clang_format failed on $f:" >&2
            sed 's/^/  /' <<<"$out" | head -5 >&2
        fi
    fi
done
[ ${#broken[@]} -eq 0 ] || exit 2

if [ ${#differ[@]} -gt 0 ]; then
    echo "format: ${#differ[@]} of ${#files[@]} files differ from .clang-format ($version):" >&2
    for f in "${differ[@]}"; do
        echo "  $f    fix: $clang_format -i $f" >&2
    done
    echo "format: see the changes with: $clang_format FILE | diff FILE -" >&2
    exit 1
fi
echo "format: ${#files[@]} files match .clang-format"
