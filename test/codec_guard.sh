#!/usr/bin/env bash
# The position codec (extension/position_codec.cpp) throws C++ exceptions, so
# it must never include PostgreSQL's headers (an ereport there would longjmp
# over destructors).  Its compile-time guard must hold: compiled on its own it
# builds; with pg.hpp forced in front of it, it refuses with its #error.
# Usage: bash test/codec_guard.sh   (uses PG_CONFIG like the Makefile)
set -euo pipefail
cd "$(dirname "$0")/.."
pg_config=${PG_CONFIG:-pg_config}
cxx=${CXX:-g++}
includes=(-I "$("$pg_config" --includedir-server)" -I extension)

"$cxx" -std=c++17 -fsyntax-only "${includes[@]}" extension/position_codec.cpp
if out=$("$cxx" -std=c++17 -fsyntax-only "${includes[@]}" -include extension/pg.hpp \
        extension/position_codec.cpp 2>&1); then
    echo "codec guard: position_codec.cpp compiled with pg.hpp included" >&2
    exit 1
fi
if ! grep -q "position_codec.cpp is pure C++" <<<"$out"; then
    echo "codec guard: the compile failed, but not on the guard:" >&2
    echo "$out" | head -20 >&2
    exit 1
fi
echo "codec guard: position_codec.cpp builds alone and refuses PostgreSQL's headers"
