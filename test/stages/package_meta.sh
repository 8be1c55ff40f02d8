#!/usr/bin/env bash
# The release metadata agree: META.json (PGXN) is valid JSON with the fields
# PGXN requires, and its version is the CMake project's, the extension's
# default_version (major.minor) and debian/changelog's; the license is the
# PostgreSQL License in LICENSE, META.json and debian/copyright alike.
set -euo pipefail
cd "$(dirname "$0")/../.."
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
# The license: LICENSE's text is debian/copyright's License paragraph.
license = open("LICENSE").read()
if meta.get("license") != "postgresql" or not license.startswith("PostgreSQL License\n"):
    errors.append(f"META.json license {meta.get('license')!r} / LICENSE are not the PostgreSQL License")
copyright = open("debian/copyright").read()
files = re.search(r"^Files: \*\nCopyright: (.+)\nLicense: (\S+)$", copyright, re.M)
if not files or files.group(2) != "PostgreSQL":
    errors.append("debian/copyright: Files: * is not under License: PostgreSQL")
elif files.group(1).split(" ", 1)[-1] not in license:
    errors.append(f"debian/copyright holder {files.group(1)!r} is not LICENSE's")
text = re.search(r"^License: PostgreSQL\n((?: .*\n?)+)", copyright, re.M)
deb_text = [l[1:] if l != " ." else "" for l in text.group(1).rstrip("\n").split("\n")] if text else []
lic_text = license.split("\n\n", 2)[2].rstrip("\n").split("\n")
if deb_text != lic_text:
    errors.append("debian/copyright's PostgreSQL license text differs from LICENSE's")
for e in errors:
    print(e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"package metadata: version {version} (extension {control}) agrees")
PY
