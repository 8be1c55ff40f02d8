#!/usr/bin/env bash
# An outside program built with pkg-config alone (no CMake) against an
# installed client: compiles test/find_package_project/main.cpp with
# `pkg-config --cflags --libs changefeed` and runs it.
# Usage: build.sh PREFIX BUILD_DIR   (PREFIX: where the client was installed)
set -euo pipefail
prefix=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
pc_dir=$(dirname "$(find "$prefix" -name changefeed.pc -path '*/pkgconfig/*' | head -1)")
[ -f "$pc_dir/changefeed.pc" ] || { echo "no changefeed.pc under $prefix" >&2; exit 1; }
export PKG_CONFIG_PATH=$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
flags=$(pkg-config --cflags --libs changefeed)
echo "pkg-config --cflags --libs changefeed: $flags"
# The library's directory must be the installed tree's, not the build tree's.
libdir=$(pkg-config --variable=libdir changefeed)
[ -f "$libdir/libchangefeed_client.so" ] || { echo "no libchangefeed_client.so in $libdir" >&2; exit 1; }
# shellcheck disable=SC2086  # the flags are words
c++ -std=c++20 -o "$out/pkg_config_app" "$here/../find_package_project/main.cpp" $flags
LD_LIBRARY_PATH=$libdir "$out/pkg_config_app"
# The NATS publisher's file, when the client was built with it.
if [ -f "$pc_dir/changefeed-nats.pc" ]; then
    nats_libs=$(pkg-config --libs changefeed-nats)
    case " $nats_libs " in
        *" -lchangefeed_nats "*"-lchangefeed_client "*) echo "pkg-config --libs changefeed-nats: $nats_libs" ;;
        *) echo "changefeed-nats.pc lacks the publisher or the client: $nats_libs" >&2; exit 1 ;;
    esac
fi
