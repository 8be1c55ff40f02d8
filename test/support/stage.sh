# What the stage scripts share: their options, read one way, and the programs
# of the CMake build they run.  Sourced from the repository's root, after
# `set -euo pipefail`.

# parse_options SCRIPT SPEC... -- "$@": sets the script's variables from its
# options.  A SPEC `--name=var` takes a value (`--name V` sets var to V);
# `--name=var:value` is a flag that sets var to value.  An option no SPEC
# names, or one missing its value, ends the script (exit 2).
parse_options() {
    local _script=$1 _specs=() _spec _known
    shift
    while [ "$1" != -- ]; do _specs+=("$1"); shift; done
    shift
    while [ $# -gt 0 ]; do
        _known=
        for _spec in "${_specs[@]}"; do
            [ "${_spec%%=*}" = "$1" ] || continue
            _known=1 _spec=${_spec#*=}
            if [[ $_spec == *:* ]]; then
                printf -v "${_spec%%:*}" '%s' "${_spec#*:}"
            else
                [ $# -ge 2 ] || { echo "$_script: $1 takes a value" >&2; exit 2; }
                printf -v "$_spec" '%s' "$2"
                shift
            fi
            break
        done
        [ -n "$_known" ] || { echo "$_script: unknown option $1" >&2; exit 2; }
        shift
    done
}

# cmake_targets BUILD_DIR TARGET...: builds the targets in BUILD_DIR,
# configuring it first (RelWithDebInfo, with the tests) when it is new.
cmake_targets() {
    local dir=$1
    shift
    [ -f "$dir/CMakeCache.txt" ] ||
        cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHANGEFEED_BUILD_TESTS=ON >/dev/null
    cmake --build "$dir" -j2 --target "$@" >/dev/null
}

# built_program SCRIPT BUILD_DIR PROGRAM: the path of PROGRAM built in
# BUILD_DIR; ends the script (exit 2) when there is none.
built_program() {
    local path
    path=$(find "$2" -name "$3" -type f -perm -u+x | head -1)
    [ -n "$path" ] || { echo "$1: $3 not built in $2" >&2; exit 2; }
    echo "$path"
}
