#!/usr/bin/env bash
# The PostgreSQL/C++ boundary rule of extension/pg.hpp, checked on every C++
# file of the extension.  A file is either
#  - PostgreSQL-facing (it includes pg.hpp): compiled without optimisation, so
#    that nothing is inlined away, its object must hold no destructor, no
#    throw, no catch and no unwinding cleanup (then no frame of it has a C++
#    object an ereport's longjmp would skip), and call no C++ function of a
#    pure file (only their C wrappers, which catch every exception); or
#  - pure C++ (the position codec): it throws, so it must refuse PostgreSQL's
#    headers with its own #error when pg.hpp is forced in front of it.
# Usage: bash test/stages/codec_guard.sh [file.cpp ...]   (default: every extension/**/*.cpp;
# uses PG_CONFIG like the Makefile)
set -euo pipefail
cd "$(dirname "$0")/../.."
pg_config=${PG_CONFIG:-pg_config}
cxx=${CXX:-g++}
includes=(-Wno-register -I "$("$pg_config" --includedir-server)" -I extension)
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(extension/*.cpp extension/*/*.cpp)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# What a PostgreSQL-facing object must not contain (nm names, mangled):
# destructors (D0/D1/D2), static destructors registered at exit, throwing,
# catching, and the unwinder a cleanup of a C++ object calls.
forbidden='D[012]Ev$|^__cxa_atexit$|^__cxa_throw$|^__cxa_rethrow$|^__cxa_begin_catch$|^_Unwind_Resume$|^__gxx_personality_v0$'

failed=0
facing=() pure=()
for f in "${files[@]}"; do
    macros=$("$cxx" -std=c++17 -E -dM "${includes[@]}" "$f")
    if grep -q '^#define CHANGEFEED_PG_HEADERS ' <<<"$macros"; then
        facing+=("$f")
    else
        pure+=("$f")
    fi
done

# Pure files: they build alone, refuse pg.hpp, and export C++ functions that
# PostgreSQL-facing files may not call.
: >"$work/pure_cxx_symbols"
for f in "${pure[@]}"; do
    o="$work/$(basename "$f" .cpp).o"
    "$cxx" -std=c++17 -O0 -c "${includes[@]}" "$f" -o "$o"
    nm --defined-only "$o" | awk '$2 ~ /[TW]/ && $3 ~ /^_Z/ {print $3}' >>"$work/pure_cxx_symbols"
    if out=$("$cxx" -std=c++17 -fsyntax-only "${includes[@]}" -include extension/pg.hpp "$f" 2>&1); then
        echo "codec guard: $f neither includes pg.hpp nor refuses it (a pure file needs the #error guard)" >&2
        failed=1
    elif ! grep -q "is pure C++" <<<"$out"; then
        echo "codec guard: $f failed to compile with pg.hpp, but not on its guard:" >&2
        echo "$out" | head -20 >&2
        failed=1
    fi
done
sort -u -o "$work/pure_cxx_symbols" "$work/pure_cxx_symbols"

# PostgreSQL-facing files: plain C frames only.
for f in "${facing[@]}"; do
    o="$work/$(basename "$f" .cpp).o"
    "$cxx" -std=c++17 -O0 -c "${includes[@]}" "$f" -o "$o"
    bad=$(nm "$o" | awk '{print $NF}' | grep -E "$forbidden" | sort -u || true)
    calls=$(nm --undefined-only "$o" | awk '{print $NF}' | sort -u | comm -12 - "$work/pure_cxx_symbols")
    if [ -n "$bad" ]; then
        echo "codec guard: $f includes pg.hpp but has C++ objects with destructors or exceptions:" >&2
        c++filt <<<"$bad" | sort -u | sed 's/^/    /' >&2
        failed=1
    fi
    if [ -n "$calls" ]; then
        echo "codec guard: $f includes pg.hpp but calls C++ code that may throw (use its C wrapper):" >&2
        c++filt <<<"$calls" | sort -u | sed 's/^/    /' >&2
        failed=1
    fi
done

[ "$failed" = 0 ] || exit 1
echo "codec guard: ${#facing[@]} PostgreSQL-facing files keep plain C frames; ${#pure[@]} pure C++ file(s) refuse PostgreSQL's headers"
