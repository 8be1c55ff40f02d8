#!/usr/bin/env python3
"""Assembles the extension's SQL scripts (the Makefile runs it).

  build_sql.py install              the install script, on stdout
  build_sql.py upgrade DELTA        the upgrade script made from DELTA, on stdout
  build_sql.py surface              the generated surface alone (test/stages/options_doc.sh)
  build_sql.py parts                the concern files in order, one path a line

The install script is the concern files (the SQL half of each wing of
extension/) in the order of the manifest's `sql` lines, with the SQL surface
of extension/surface.manifest generated where its `surface` line stands,
between the files above it and those below: each entry point's definition
becomes its implementation `_name` (SECURITY DEFINER), the entry point a C
function of the same signature that runs as its caller and calls it
(extension/access/caller.cpp), and every function the manifest names is granted to
its role.  A `RETURNS TABLE (LIKE name, ...)` of a concern file gets the
columns of the manifest's `columns name(...)` line in place of `LIKE name`
(a result row several functions share).

An upgrade script is its hand-written delta (tables, columns, data, DROPs of
what went or cannot be replaced) with, at its line `-- @functions`, every
CREATE OR REPLACE FUNCTION and VIEW and every event trigger (dropped and made
again) of the concern files above `surface`, the generated surface and the
files below it, whole (they hold only statements that may run again).  So a
function, view or event trigger is written once, in its concern file; a table
new in a release too: the delta names it in a line `-- @table NAME`.
"""
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "surface.manifest")
# Released and built scripts are not concern files.
NOT_PARTS = ("releases/", "upgrade/", "changefeed--")
MARKER = "-- @functions"
TABLE = "-- @table "
# What an upgrade runs again of the concern files above the surface.
AGAIN = ("CREATE OR REPLACE FUNCTION", "CREATE OR REPLACE VIEW", "CREATE EVENT TRIGGER", "ALTER EVENT TRIGGER")
ROLES = {"reader": "changefeed_reader", "processor": "changefeed_processor", "admin": "changefeed_admin",
         "public": "PUBLIC"}
KINDS = ("entry", "definer", "grant")


class Error(Exception):
    pass


# ---- reading SQL -------------------------------------------------------------

def skip_quoted(text, i):
    """The index after the comment or quoted text starting at i, or i."""
    if text.startswith("--", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j + 1
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return len(text) if j < 0 else j + 2
    c = text[i]
    if c in "'\"":
        j = i + 1
        while True:
            j = text.find(c, j)
            if j < 0:
                return len(text)
            if text.startswith(c + c, j):
                j += 2
                continue
            return j + 1
    if c == "$":
        m = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", text[i:])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            j = text.find(m.group(0), i + len(m.group(0)))
            return len(text) if j < 0 else j + len(m.group(0))
    return i


def pieces(text, start=0):
    """(i, j, kind) for each piece of text from `start`: a comment ('-'), a
    quoted string or dollar-quoted body ('q'), a quoted name ('"') or one
    character of code ('c')."""
    i = start
    while i < len(text):
        j = skip_quoted(text, i)
        if j == i:
            yield i, i + 1, "c"
            i += 1
        else:
            yield i, j, "-" if text[i] in "-/" else '"' if text[i] == '"' else "q"
            i = j


def statements(text):
    """The file as a list of statements, each with the comments before it:
    joined, they give the text back."""
    out, start = [], 0
    for i, j, kind in pieces(text):
        if kind == "c" and text[i] == ";" and i >= start:
            end = j + 1 if text.startswith("\n", j) else j
            out.append(text[start:end])
            start = end
    if code(text[start:]).strip():
        raise Error("text after the last statement: " + text[start:start + 60].strip())
    if start < len(text):
        out.append(text[start:])
    return out


def rewrite(text, comment, string):
    """The text with each comment replaced by `comment` and each string or
    body by `string` (None: kept)."""
    out = []
    for i, j, kind in pieces(text):
        piece = comment if kind == "-" else string if kind == "q" and string is not None else text[i:j]
        out.append(piece)
    return "".join(out)


def code(text):
    """The text with comments removed and strings and bodies blanked to ''."""
    return rewrite(text, " ", "''")


def one_line(text):
    """Comments dropped, white space collapsed (strings kept)."""
    return " ".join(rewrite(text, " ", None).split())


def skip_space(text, i):
    """The index of the first character from i on that is no space or comment."""
    for i, j, kind in pieces(text, i):
        if kind != "-" and not text[i].isspace():
            return i
    return len(text)


def head(stmt):
    """The first words of a statement, upper case."""
    return " ".join(code(stmt).split()[:5]).upper()


def matching_paren(text, at):
    """The index of the parenthesis closing the one at `at`."""
    depth = 0
    for i, j, kind in pieces(text, at):
        if kind == "c" and text[i] in "()":
            depth += 1 if text[i] == "(" else -1
            if depth == 0:
                return i
    raise Error("unbalanced parentheses")


def split_top(text):
    """Comma-separated items at the top level of `text`."""
    items, depth, start = [], 0, 0
    for i, j, kind in pieces(text):
        if kind != "c":
            continue
        if text[i] in "([":
            depth += 1
        elif text[i] in ")]":
            depth -= 1
        elif text[i] == "," and depth == 0:
            items.append(text[start:i])
            start = j
    if text[start:].strip():
        items.append(text[start:])
    return items


TYPE_ALIASES = {"int": "integer", "int4": "integer", "bool": "boolean", "int8": "bigint",
                "float8": "double precision", "timestamptz": "timestamp with time zone"}
MODES = ("IN", "OUT", "INOUT", "VARIADIC")


def arg_parts(arg):
    """(mode, name, type, rest) of one declared argument."""
    arg = one_line(arg)
    m = re.match(r"(.*?)(\s+(?:DEFAULT\b|=).*)?$", arg, re.I | re.S)
    decl, rest = m.group(1), m.group(2) or ""
    words = decl.split()
    mode = "IN"
    if words and words[0].upper() in MODES:
        mode = words.pop(0).upper()
    if len(words) < 2:
        raise Error(f"argument without a name: {arg}")
    return mode, words[0], " ".join(words[1:]), rest


def normal_type(t):
    t = " ".join(t.lower().split())
    suffix = ""
    while t.endswith("[]"):
        t, suffix = t[:-2].strip(), suffix + "[]"
    return TYPE_ALIASES.get(t, t) + suffix


class Function:
    """A CREATE OR REPLACE FUNCTION statement, read far enough to declare its
    entry point."""

    def __init__(self, stmt):
        self.stmt = stmt
        m = re.search(r"CREATE\s+OR\s+REPLACE\s+FUNCTION\s+changefeed\.(\w+)\s*\(", stmt)
        self.name = m.group(1)
        self.name_at = m.start(1)
        open_at = m.end() - 1
        close_at = matching_paren(stmt, open_at)
        self.args = [a for a in split_top(stmt[open_at + 1:close_at])]
        self.returns = None
        i = skip_space(stmt, close_at + 1)
        flat = code(stmt[i:])
        if stmt[i:i + 7].upper() == "RETURNS":
            i = skip_space(stmt, i + 7)
            if stmt[i:i + 5].upper() == "TABLE":
                p = stmt.index("(", i)
                q = matching_paren(stmt, p)
                self.returns = "TABLE (" + ", ".join(one_line(c) for c in split_top(stmt[p + 1:q])) + ")"
                flat = code(stmt[q + 1:])
            else:
                rest = code(stmt[i:])
                t = re.match(r"(.*?)\s+(?=(?:LANGUAGE|AS|STRICT|IMMUTABLE|STABLE|VOLATILE|PARALLEL|SECURITY|SET|"
                             r"COST|ROWS|CALLED|LEAKPROOF|NOT|WINDOW|RETURNS|BEGIN)\b)", rest, re.I | re.S)
                self.returns = " ".join(t.group(1).split())
                flat = rest[t.end():]
        words = flat.upper().split()
        self.strict = "STRICT" in words or "RETURNS NULL ON NULL INPUT" in " ".join(words)
        self.volatility = next((w for w in words if w in ("IMMUTABLE", "STABLE", "VOLATILE")), "VOLATILE")
        par = re.search(r"PARALLEL\s+(SAFE|RESTRICTED|UNSAFE)", " ".join(words))
        self.parallel = par.group(1) if par else "UNSAFE"

    def in_types(self):
        return [normal_type(t) for mode, _, t, _ in map(arg_parts, self.args) if mode != "OUT"]

    def entry_point(self, renames):
        args = []
        for a in self.args:
            mode, name, t, rest = arg_parts(a)
            name = renames.get(name, name)
            args.append(("" if mode == "IN" else mode + " ") + f"{name} {t}{rest}")
        lines = [f"CREATE OR REPLACE FUNCTION changefeed.{self.name}(" + ", ".join(args) + ")"]
        if self.returns:
            lines.append(f"RETURNS {self.returns}")
        lines.append(f"LANGUAGE c {'STRICT ' if self.strict else ''}{self.volatility} PARALLEL {self.parallel}")
        lines.append("AS 'MODULE_PATHNAME', 'changefeed_call_definer';")
        return "\n".join(lines) + "\n"


# ---- the manifest ------------------------------------------------------------

class Entry:
    def __init__(self, kind, name, types, role, renames, where):
        self.kind, self.name, self.types, self.role, self.renames, self.where = kind, name, types, role, renames, where

    def signature(self, name=None):
        return f"changefeed.{name or self.name}({', '.join(self.types)})"


def read_manifest(path):
    """The manifest's entries, its shared result rows (name -> columns), and
    its concern files in order: (path from extension/, whether it comes after
    the surface)."""
    entries, rows, parts, after = [], {}, [], None
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{os.path.basename(path)}:{n}"
        m = re.match(r"sql\s+(\S+\.sql)$", line)
        if m:
            if m.group(1) in [p for p, _ in parts]:
                raise Error(f"{where}: sql {m.group(1)} listed twice")
            parts.append((m.group(1), after is not None))
            continue
        if line == "surface":
            if after is not None:
                raise Error(f"{where}: surface listed twice")
            after = n
            continue
        m = re.match(r"columns\s+(\w+)\((.*)\)$", line)
        if m:
            if m.group(1) in rows:
                raise Error(f"{where}: columns {m.group(1)} listed twice")
            rows[m.group(1)] = [" ".join(c.split()) for c in split_top(m.group(2))]
            continue
        m = re.match(r"(\w+)\s+(\w+)\(([^)]*)\)\s+(\w+|-)((?:\s+\w+=\w+)*)$", line)
        if not m or m.group(1) not in KINDS or (m.group(4) != "-" and m.group(4) not in ROLES):
            raise Error(f"{where}: expected `KIND name(types) ROLE [param=name ...]`, KIND one of "
                        f"{', '.join(KINDS)}, ROLE one of {', '.join(ROLES)} or -")
        types = [t.strip() for t in m.group(3).split(",") if t.strip()]
        renames = dict(r.split("=") for r in m.group(5).split())
        if renames and m.group(1) != "entry":
            raise Error(f"{where}: only an entry point names its parameters otherwise")
        entries.append(Entry(m.group(1), m.group(2), types, m.group(4), renames, where))
    names = [e.name for e in entries]
    for d in sorted({x for x in names if names.count(x) > 1}):
        raise Error(f"{os.path.basename(path)}: {d} listed twice")
    if after is None:
        raise Error(f"{os.path.basename(path)}: needs one line `surface` among its `sql` lines")
    here = os.path.dirname(path)
    found = {os.path.relpath(f, here) for f in glob.glob(os.path.join(here, "*.sql"))
             + glob.glob(os.path.join(here, "*", "*.sql"))}
    found = {f for f in found if not f.startswith(NOT_PARTS)}
    for f in sorted(found - {p for p, _ in parts}):
        raise Error(f"{os.path.basename(path)}: extension/{f} has no `sql` line")
    for f in sorted({p for p, _ in parts} - found):
        raise Error(f"{os.path.basename(path)}: sql {f}: no such file")
    return entries, rows, parts


def with_rows(stmt, rows, where):
    """The statement with each `LIKE name` opening a RETURNS TABLE replaced by
    the columns of the manifest's row `name`, one a line."""
    def columns(m):
        if m.group(2) not in rows:
            raise Error(f"{where}: RETURNS TABLE (LIKE {m.group(2)}) but the manifest has no `columns {m.group(2)}(...)`")
        return m.group(1) + ",\n    ".join(rows[m.group(2)])
    return re.sub(r"(\bRETURNS\s+TABLE\s*\(\s*)LIKE\s+(\w+)\b", columns, stmt, flags=re.I)


# ---- assembling --------------------------------------------------------------

class Sources:
    """The concern files, read and checked against the manifest."""

    def __init__(self, manifest=MANIFEST):
        self.entries, rows, parts = read_manifest(manifest)
        here = os.path.dirname(manifest)
        self.parts = [(p, [with_rows(s, rows, p) for s in statements(open(os.path.join(here, p), encoding="utf-8").read())])
                      for p, _ in parts]
        self.after = {p for p, after in parts if after}
        self.defined = {}
        for path, stmts in self.parts:
            for i, s in enumerate(stmts):
                h = head(s)
                if h.startswith("CREATE FUNCTION") or h.startswith("CREATE VIEW"):
                    raise Error(f"{path}: write CREATE OR REPLACE: {one_line(s)[:70]}")
                if h.startswith("CREATE OR REPLACE FUNCTION"):
                    f = Function(s)
                    self.defined.setdefault(f.name, []).append((path, i, f))
        self.entry_of = {}
        for e in self.entries:
            found = self.defined.get(e.name, [])
            if len(found) != 1:
                raise Error(f"{e.where}: {e.name} is defined {len(found)} times in the concern files")
            path, i, f = found[0]
            if f.in_types() != [normal_type(t) for t in e.types]:
                raise Error(f"{e.where}: {e.signature()} but {path} declares "
                            f"({', '.join(f.in_types())})")
            if e.kind == "entry":
                if path in self.after:
                    raise Error(f"{e.where}: an entry point's implementation belongs above `surface`")
                declared = {arg_parts(a)[1] for a in f.args}
                for old in e.renames:
                    if old not in declared:
                        raise Error(f"{e.where}: {e.name} has no parameter {old}")
                self.entry_of[(path, i)] = e

    def renamed(self, path, i, stmt):
        """The statement, an entry point's definition renamed to its implementation."""
        e = self.entry_of.get((path, i))
        if not e:
            return stmt
        at = Function(stmt).name_at
        return stmt[:at] + "_" + stmt[at:]

    def surface(self):
        out = ["-- ---- the SQL surface, generated from extension/surface.manifest ----\n"]
        for e in self.entries:
            if e.kind == "entry":
                f = self.defined[e.name][0][2]
                out.append(f"ALTER FUNCTION {e.signature('_' + e.name)} SECURITY DEFINER;\n")
                out.append(f.entry_point(e.renames))
            elif e.kind == "definer":
                out.append(f"ALTER FUNCTION {e.signature()} SECURITY DEFINER;\n")
        out.append("\n-- PUBLIC gets no function but those the manifest gives it; each role the ones it gives the role.\n")
        out.append("REVOKE ALL ON ALL FUNCTIONS IN SCHEMA changefeed FROM PUBLIC;\n")
        for role, grantee in ROLES.items():
            granted = [e for e in self.entries if e.role == role]
            if granted:
                out.append("GRANT EXECUTE ON FUNCTION\n    "
                           + ",\n    ".join(e.signature() for e in granted) + f"\n    TO {grantee};\n")
        return "".join(out) + "\n"

    def install(self):
        out, placed = [], False
        for path, stmts in self.parts:
            if not placed and path in self.after:
                out.append(self.surface())
                placed = True
            out.extend(self.renamed(path, i, s) for i, s in enumerate(stmts))
        if not placed:
            out.append(self.surface())
        return "".join(out)

    def replaceable(self):
        """What an upgrade takes from the concern files."""
        out = []
        for path, stmts in self.parts:
            if path in self.after:
                out.append(self.surface() if not any(x.startswith("-- ---- the SQL surface") for x in out) else "")
                out.append(f"-- ---- extension/{path} ----\n")
                out.extend(stmts)
                continue
            taken = [(i, s) for i, s in enumerate(stmts) if head(s).startswith(AGAIN)]
            if taken:
                out.append(f"-- ---- extension/{path} ----\n")
                out.extend(self.again(path, i, s) for i, s in taken)
        if not any(x.startswith("-- ---- the SQL surface") for x in out):
            out.append(self.surface())
        return "".join(out)

    def again(self, path, i, stmt):
        """A statement of a concern file as an upgrade runs it: an event
        trigger is made anew (there is no CREATE OR REPLACE EVENT TRIGGER)."""
        stmt = self.renamed(path, i, stmt).lstrip("\n")
        m = re.match(r"\s*CREATE\s+EVENT\s+TRIGGER\s+(\w+)", code(stmt), re.I)
        if m:
            stmt = f"DROP EVENT TRIGGER IF EXISTS {m.group(1)};\n" + stmt
        return stmt + "\n"

    def table(self, line, delta_path):
        """A delta's `-- @table NAME`: the table's CREATE TABLE from its concern
        file, so that a table new in a release is written once."""
        name = line[len(TABLE):].strip()
        found = [s for _, stmts in self.parts for s in stmts
                 if re.match(rf"\s*CREATE\s+TABLE\s+{re.escape(name)}\s*\(", code(s), re.I)]
        if len(found) != 1:
            raise Error(f"{delta_path}: {line.strip()}: {len(found)} CREATE TABLE {name} in the concern files")
        return found[0].strip("\n")

    def upgrade(self, delta_path):
        delta = open(delta_path, encoding="utf-8").read()
        lines = delta.split("\n")
        at = [n for n, l in enumerate(lines) if l.strip() == MARKER]
        if len(at) != 1:
            raise Error(f"{delta_path}: needs one line `{MARKER}` where the functions go")
        lines = [self.table(l, delta_path) if l.startswith(TABLE) else l for l in lines]
        before, after = "\n".join(lines[:at[0]]), "\n".join(lines[at[0] + 1:])
        name = os.path.basename(delta_path)
        return (f"-- Built from extension/upgrade/delta/{name} and the concern files (extension/build_sql.py).\n"
                + before + "\n" + self.replaceable() + after)


def main(argv):
    try:
        if argv[1:] == ["install"]:
            sys.stdout.write(Sources().install())
        elif argv[1:] == ["parts"]:
            here = os.path.relpath(HERE)
            sys.stdout.write("".join(os.path.join(here, p) + "\n" for p, _ in read_manifest(MANIFEST)[2]))
        elif argv[1:] == ["surface"]:
            sys.stdout.write(Sources().surface())
        elif len(argv) == 3 and argv[1] == "upgrade":
            sys.stdout.write(Sources().upgrade(argv[2]))
        else:
            sys.stderr.write(__doc__)
            return 2
    except Error as e:
        sys.stderr.write(f"build_sql.py: {e}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
