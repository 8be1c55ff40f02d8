# Citus, a peer for tests only (sourced by test/citus_cluster.sh): built from
# the sources in ../shared/vendor once per PostgreSQL major and source, cached
# in /var/cache/changefeed-citus, and installed into that major's PostgreSQL
# directories on this machine.  Nothing of it is packaged.

citus_cache=${CITUS_CACHE:-/var/cache/changefeed-citus}

# The folder of the vendored sources: $CITUS_VENDOR, else ../shared/vendor
# beside this checkout, else beside the checkout it was cloned from.
citus_vendor_dir() {
    local repo origin
    [ -z "${CITUS_VENDOR:-}" ] || { echo "$CITUS_VENDOR"; return; }
    repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    if [ -d "$repo/../shared/vendor" ]; then echo "$repo/../shared/vendor"; return; fi
    origin=$(git -C "$repo" config --get remote.origin.url 2>/dev/null || true)
    origin=${origin#file://}
    if [ -n "$origin" ] && [ -d "$origin/../shared/vendor" ]; then echo "$origin/../shared/vendor"; return; fi
    echo "$repo/../shared/vendor"
}

citus_version_for() {  # PostgreSQL major -> the Citus release that builds against it
    case "$1" in
        15 | 16 | 17) echo 13.2.2 ;;
        18) echo 14.0.1 ;;
        *) echo "citus: no Citus release known for PostgreSQL $1" >&2; return 1 ;;
    esac
}

# citus_install PG_CONFIG [ROOT]: Citus built (or taken from the cache) and
# installed where PG_CONFIG's server loads extensions from (under ROOT, / by
# default: a copy of a PostgreSQL installation can take it too).
citus_install() {
    local pg_config=$1 into=${2:-/} major version vendor tarball patch key dir
    major=$("$pg_config" --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
    version=$(citus_version_for "$major")
    vendor=$(citus_vendor_dir)
    tarball=$vendor/citus-$version.tar.gz
    if [ ! -f "$tarball" ]; then
        # Without the sources, a build cached for this PostgreSQL will do.
        for dir in $(ls -1dt "$citus_cache/$major"-* 2>/dev/null); do
            [ -f "$dir/built" ] && [ -f "$dir/root$("$pg_config" --pkglibdir)/citus.so" ] || continue
            echo "citus: $tarball not found; using the build cached in $dir"
            citus_copy "$dir/root" "$into"
            return
        done
        echo "citus: $tarball not found, and no build cached (see ../shared/vendor/README.md)" >&2
        return 1
    fi
    patch=$vendor/citus-$version-debian-pg$major.patch
    key=$({ sha256sum "$tarball"; [ -f "$patch" ] && sha256sum "$patch"; "$pg_config" --version; "$pg_config" --pkglibdir; } | sha256sum | cut -c1-16)
    dir=$citus_cache/$major-$key
    if [ ! -f "$dir/built" ]; then
        citus_build_deps
        echo "citus: building Citus $version for PostgreSQL $major (cached in $dir)"
        rm -rf "$dir"
        mkdir -p "$dir/src" "$dir/root"
        tar -xzf "$tarball" -C "$dir/src"
        [ -f "$patch" ] && patch -s -d "$dir/src/citus-$version" -p1 <"$patch"
        (
            cd "$dir/src/citus-$version"
            ./configure --without-libcurl PG_CONFIG="$pg_config" >"$dir/configure.log" 2>&1
            make -j2 >"$dir/make.log" 2>&1
            make install DESTDIR="$dir/root" >"$dir/install.log" 2>&1
        ) || { echo "citus: the build failed; see $dir/*.log" >&2; grep -E "error|Error" "$dir/make.log" | head -20 >&2; return 1; }
        rm -rf "$dir/src"
        touch "$dir/built"
    fi
    citus_copy "$dir/root" "$into"
}

# citus_copy ROOT INTO: the files under ROOT copied under INTO, only those
# that differ, each renamed into place: a running server keeps the library it
# mapped (overwritten in place, it crashes).
citus_copy() {
    local f target
    while IFS= read -r -d '' f; do
        target=$2/${f#"$1/"}
        cmp -s "$f" "$target" && continue
        mkdir -p "$(dirname "$target")"
        cp -p "$f" "$target.new.$$" && mv -f "$target.new.$$" "$target"
    done < <(find "$1" -type f -print0)
}

citus_build_deps() {
    local p missing=()
    for p in liblz4-dev libzstd-dev libkrb5-dev libicu-dev; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "citus: installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
}
