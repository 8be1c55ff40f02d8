#!/usr/bin/env bash
# The release metadata agree: META.json (PGXN) is valid JSON with the fields
# PGXN requires, and its version is the CMake project's, the extension's
# default_version (major.minor) and debian/changelog's.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import json, re, sys
meta = json.load(open("META.json"))
errors = []
for key in ("name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"):
    if key not in meta:
        errors.append(f"META.json lacks {key}")
version = meta.get("version", "")
cmake = re.search(r"project\(changefeed VERSION ([0-9.]+)", open("CMakeLists.txt").read()).group(1)
control = re.search(r"default_version = '([0-9.]+)'", open("extension/changefeed.control").read()).group(1)
changelog = re.match(r"changefeed \(([^)]+)\)", open("debian/changelog").read()).group(1)
if version != cmake:
    errors.append(f"META.json version {version} != CMakeLists.txt {cmake}")
if not version.startswith(control + "."):
    errors.append(f"META.json version {version} is not of default_version {control}")
if changelog != version:
    errors.append(f"debian/changelog version {changelog} != META.json {version}")
ext = meta.get("provides", {}).get("changefeed", {})
if ext.get("version") != version:
    errors.append("META.json provides.changefeed.version differs from version")
pg = meta.get("prereqs", {}).get("runtime", {}).get("requires", {}).get("PostgreSQL")
if pg != "15.0.0":
    errors.append(f"META.json runtime prerequisite PostgreSQL is {pg}, not 15.0.0")
for e in errors:
    print(e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"package metadata: version {version} (extension {control}) agrees")
PY
