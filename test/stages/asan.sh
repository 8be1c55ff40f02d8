#!/usr/bin/env bash
# The client's lifetime-sensitive suites built with AddressSanitizer and
# UndefinedBehaviorSanitizer (halting on the first report): cancelling a
# subscription and destroying a processor from inside their own callbacks,
# subscriptions, the latest-version processor and the in-memory provider.  A
# build directory and ports of its own, so that it runs beside the ordinary
# build.
# Usage: bash test/stages/asan.sh [--build-dir DIR] [--port-base N] [--test-dir DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=build-asan port_base=55600 test_dir=/tmp/client-test-asan
while [ $# -gt 0 ]; do
    case $1 in
        --build-dir) build_dir=$2; shift ;;
        --port-base) port_base=$2; shift ;;
        --test-dir) test_dir=$2; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# Not transactional_test: it kills connections mid-statement, and libpqxx 6.4 then leaks the
# libpq result of the broken exec (a PGresult), which LeakSanitizer reports.
tests=(cancel_in_callback_test processor_self_destroy_test subscription_test latest_version_test consumer_policy_test
       in_memory_test bridge_test)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Debug -DCHANGEFEED_BUILD_TESTS=ON -DCHANGEFEED_BUILD_EXAMPLES=OFF \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
    -DCHANGEFEED_TEST_PORT_BASE="$port_base" -DCHANGEFEED_TEST_DIR="$test_dir" >/dev/null
cmake --build "$build_dir" -j2 --target "${tests[@]}"
pattern="^($(IFS='|'; echo "${tests[*]}"))\$"
ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir "$build_dir" --output-on-failure -R "$pattern"
