#!/usr/bin/env bash
# docs/options.md is the reference of every option a user sets.  Fails when
#   - an argument of a SQL function a role is granted (extension/surface.manifest,
#     GRANT EXECUTE in the surface extension/build_sql.py makes of it) is missing from that function's section
#     (a heading naming `changefeed.NAME(`, a table row "| `argument` |"),
#   - a changefeed.* setting defined in extension/**/*.cpp has no row "| `changefeed.NAME` |",
#   - a field of an option struct of the client (client/include/changefeed/*.hpp,
#     every struct whose name ends in Options) is missing from that struct's
#     section (a heading naming it, a table row "| `field` |").
# Usage: bash test/stages/options_doc.sh [DOC] [--list]   (default docs/options.md; --list prints what was parsed)
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python3 - "${1:-docs/options.md}" "${@:2}" <<'EOF'
import glob, re, subprocess, sys

doc_path = sys.argv[1]
doc = open(doc_path, encoding="utf-8").read().splitlines()
problems = []

def sections(pattern):
    """Lines of each section whose heading matches `pattern`, up to the next
    heading of the same or a higher level."""
    out = []
    for i, line in enumerate(doc):
        m = re.match(r"(#+) ", line)
        if m and re.search(pattern, line):
            level, body = len(m.group(1)), []
            for rest in doc[i + 1:]:
                n = re.match(r"(#+) ", rest)
                if n and len(n.group(1)) <= level:
                    break
                body.append(rest)
            out.append(body)
    return out

def rows(body):
    return {m.group(1) for l in body for m in [re.match(r"\|\s*`([^`]+)`\s*\|", l)] if m}

# SQL: the functions roles are granted, with the argument names of their last
# definition (the generated surface, last, spells out the entry points).
sql_files = subprocess.run([sys.executable, "extension/build_sql.py", "parts"], check=True,
                           capture_output=True, text=True).stdout.split()
sql = "\n".join(open(f, encoding="utf-8").read() for f in sql_files)
sql += "\n" + subprocess.run([sys.executable, "extension/build_sql.py", "surface"], check=True,
                             capture_output=True, text=True).stdout
granted = []
# (What PUBLIC is granted is a trigger function no one calls with arguments.)
for block, grantee in re.findall(r"GRANT EXECUTE ON FUNCTION(.*?)\bTO\s+(\S+)", sql, re.S):
    if grantee.rstrip(";").lower() != "public":
        granted += re.findall(r"changefeed\.(\w+)\(", block)

def arguments(name):
    starts = [m.end() for m in re.finditer(r"CREATE (?:OR REPLACE )?FUNCTION changefeed\.%s\(" % name, sql)]
    if not starts:
        return None
    text, depth, i = sql[starts[-1]:], 1, 0
    while depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    text = re.sub(r"--[^\n]*", "", text[:i - 1])
    args, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            args.append(cur); cur = ""
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        cur += ch
    args.append(cur)
    names = []
    for a in (a.split() for a in args if a.strip()):
        if a[0].upper() == "OUT":
            continue
        if a[0].upper() in ("IN", "INOUT", "VARIADIC"):
            a = a[1:]
        names.append(a[0].strip('"'))
    return names

sql_args = 0
for name in dict.fromkeys(granted):
    names = arguments(name)
    if names is None:
        problems.append(f"changefeed.{name}: granted in extension/surface.manifest, but no CREATE FUNCTION found")
        continue
    sql_args += len(names)
    found = sections(r"`changefeed\.%s\(" % name)
    if not found:
        problems.append(f"changefeed.{name}(): no section in {doc_path} (a heading with `changefeed.{name}(`)")
        continue
    documented = set().union(*(rows(b) for b in found))
    for a in names:
        if a not in documented:
            problems.append(f"changefeed.{name}(): argument `{a}` is not in its table in {doc_path}")

# Settings.
settings = sorted(set(re.findall(r'DefineCustom\w+Variable\(\s*"(changefeed\.\w+)"',
                                 "\n".join(open(f).read() for f in glob.glob("extension/**/*.cpp", recursive=True)))))
documented = set().union(*(rows(b) for b in sections(r"[Ss]ettings"))) if sections(r"[Ss]ettings") else set()
for s in settings:
    if s not in documented:
        problems.append(f"setting {s} is not in the settings table of {doc_path}")

# Client option structs.
fields_total = 0
structs = {}
for path in sorted(glob.glob("client/include/changefeed/*.hpp")):
    text = open(path, encoding="utf-8").read()
    for m in re.finditer(r"^struct (\w*Options|EnvelopeSource)\b[^{;]*\{(.*?)^\};", text, re.S | re.M):
        name, body = m.group(1), re.sub(r"(^|\s)//[^\n]*", "", m.group(2))
        # Constructors with a body ({} has no ';' to end them).
        body = re.sub(r"\b%s\s*\([^)]*\)\s*(:[^{;]*)?\{[^}]*\}" % name, ";", body)
        fields = []
        for stmt in body.split(";"):
            stmt = " ".join(stmt.split())
            if not stmt or stmt.startswith(name) or "operator" in stmt:
                continue
            f = re.search(r"(\w+)\s*(\{[^{}]*\}|=[^=]*)?$", stmt)
            if f:
                fields.append(f.group(1))
        structs[name] = (path, fields)
for name, (path, fields) in structs.items():
    fields_total += len(fields)
    found = sections(r"`%s`" % name)
    if not found:
        problems.append(f"{name} ({path}): no section in {doc_path} (a heading with `{name}`)")
        continue
    documented = set().union(*(rows(b) for b in found))
    for f in fields:
        if f not in documented:
            problems.append(f"{name}::{f} ({path}) is not in its table in {doc_path}")

if len(structs) == 0 or sql_args == 0 or not settings:
    problems.append("found no option structs, SQL arguments or settings: is the parser broken?")
if "--list" in sys.argv:
    for name in dict.fromkeys(granted):
        print("sql", name, arguments(name))
    print("settings", settings)
    for name, (path, fields) in structs.items():
        print("struct", name, fields)
for p in problems:
    print("options_doc: " + p, file=sys.stderr)
if problems:
    sys.exit(1)
print(f"options_doc: {len(dict.fromkeys(granted))} SQL functions ({sql_args} arguments), "
      f"{len(settings)} settings, {len(structs)} option structs ({fields_total} fields) documented")
EOF
