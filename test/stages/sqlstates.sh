#!/usr/bin/env bash
# The registry of SQLSTATEs (extension/sqlstates.sql) is the one place
# each code is documented.  Fails when
#   - the SQL files or the C++ sources raise a CF code the registry lacks, or the
#     client (client/src, client/cli) maps one it lacks,
#   - the C++ sources define a CF code outside extension/sqlstates.hpp,
#   - the client's tables of SQLSTATEs (client/src/core/db.cpp: into errc,
#     and the conditions the worker reads beyond errc) map a code that is neither in the registry nor one of
#     PostgreSQL's own (its errcodes.txt), or a CF code the registry lacks,
#   - the README's Errors table differs from the registry.
# Usage: bash test/stages/sqlstates.sh            check
#        bash test/stages/sqlstates.sh --readme   print the README's table from the registry
set -euo pipefail
cd "$(dirname "$0")/../.."
registry=extension/sqlstates.sql

# "CODE<TAB>meaning" lines of the registry.
entries() { sed -n 's/^--   \([A-Z0-9]\{5\}\)  \(.*\)$/\1\t\2/p' "$registry"; }
readme_table() {
    echo '| SQLSTATE | meaning |'
    echo '|---|---|'
    entries | awk -F '\t' '{ printf "| `%s` | %s |\n", $1, $2 }'
}
if [ "${1:-}" = --readme ]; then readme_table; exit 0; fi

failed=0
known=$(entries | cut -f1 | sort -u)
# CF codes raised in SQL ('CFnnn') and built in C++ (MAKE_SQLSTATE('C', 'F', ...)).
used_sql=$(grep -ho "ERRCODE = 'CF[0-9]\{3\}'" $(python3 extension/build_sql.py parts) | grep -o 'CF[0-9]\{3\}' | sort -u)
used_cpp=$(grep -ho "MAKE_SQLSTATE('C', 'F', '[0-9]', '[0-9]', '[0-9]')" extension/*.cpp extension/*.hpp extension/*/*.cpp extension/*/*.hpp |
    sed "s/MAKE_SQLSTATE('C', 'F', '\([0-9]\)', '\([0-9]\)', '\([0-9]\)')/CF\1\2\3/" | sort -u)
# CF codes the client library and CLI map (db.cpp and others: "CFnnn").
used_client=$(grep -rho '"CF[0-9]\{3\}"' client/src client/cli client/include | tr -d '"' | sort -u)
for code in $used_sql $used_cpp $used_client; do
    if ! grep -qx "$code" <<<"$known"; then
        echo "sqlstates: $code is raised but not in $registry" >&2
        failed=1
    fi
done
if grep -ln "MAKE_SQLSTATE('C', 'F'" extension/*.cpp extension/*.hpp extension/*/*.cpp extension/*/*.hpp | grep -vx extension/sqlstates.hpp; then
    echo "sqlstates: the files above define a CF code outside extension/sqlstates.hpp" >&2
    failed=1
fi
# The client's SQLSTATE tables: the codes code_of_sqlstate() (into errc) and
# condition_of_sqlstate() (what the worker reads beyond errc) compare with
# (state == "XXXXX") and the classes taken by prefix (rfind("XX", 0)).
client_table=client/src/core/db.cpp
pg_errcodes="$(${PG_CONFIG:-pg_config} --sharedir 2>/dev/null)/errcodes.txt"
client_tables() {
    sed -n -e '/^errc code_of_sqlstate(/,/^}/p' \
        -e '/^std::optional<ServerCondition> condition_of_sqlstate(/,/^}/p' "$client_table"
}
mapped=$(client_tables | grep -o 'state == "[0-9A-Z]\{5\}"' | grep -o '[0-9A-Z]\{5\}' | sort -u)
mapped_classes=$(client_tables | grep -o 'rfind("[0-9A-Z]\{2\}", 0)' | grep -o '"[0-9A-Z]\{2\}"' | tr -d '"' | sort -u)
if ! grep -q '^errc code_of_sqlstate(' "$client_table" || ! grep -q '^std::optional<ServerCondition> condition_of_sqlstate(' "$client_table"; then
    echo "sqlstates: found no code_of_sqlstate() or condition_of_sqlstate() table in $client_table" >&2
    failed=1
fi
mapped_cf=0 mapped_pg=0
for code in $mapped; do
    if grep -qx "$code" <<<"$known"; then
        mapped_cf=$((mapped_cf + 1))
    elif [[ $code != CF* ]] && [ -f "$pg_errcodes" ] && grep -q "^$code " "$pg_errcodes"; then
        mapped_pg=$((mapped_pg + 1))
    else
        echo "sqlstates: $client_table maps $code, which is not in $registry${pg_errcodes:+ nor in $pg_errcodes}" >&2
        failed=1
    fi
done
for class in $mapped_classes; do
    if ! [ -f "$pg_errcodes" ] || ! grep -q "^Section: Class $class " "$pg_errcodes"; then
        echo "sqlstates: $client_table maps the class $class, which is not a class of $pg_errcodes" >&2
        failed=1
    fi
done
# The README's table: the lines after "## Errors" from its header to the first non-table line.
readme=$(awk '/^##+ Errors$/ { on = 1; next } on && /^\|/ { print; seen = 1; next } seen { exit }' README.md)
if [ "$readme" != "$(readme_table)" ]; then
    echo "sqlstates: README.md's Errors table differs from $registry:" >&2
    diff <(echo "$readme") <(readme_table) >&2 || true
    echo "(bash test/stages/sqlstates.sh --readme prints the table to paste)" >&2
    failed=1
fi
[ "$failed" -eq 0 ] && echo "sqlstates: $(wc -l <<<"$known") codes, one registry, README agrees;" \
    "$client_table maps $((mapped_cf + mapped_pg)) codes, $mapped_cf in the registry, $mapped_pg PostgreSQL's own," \
    "and $(wc -w <<<"$mapped_classes") class(es) of PostgreSQL's"
exit "$failed"
