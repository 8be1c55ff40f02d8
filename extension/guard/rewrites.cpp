// Which ALTER COLUMN ... TYPE keeps an enabled table's stored values.
//
// A type change converts every stored value without firing a row trigger, so
// on an enabled table the feed would keep the old values (guard.cpp refuses
// it).  One keeps every value and its text when PostgreSQL's conversion of
// the column, as ALTER TABLE builds and simplifies it, calls no function:
// only relabels between the same base type (a wider length or precision,
// which the types' support functions turn into a relabel) or between text
// and varchar, and domain checks.  Anything else (a USING expression other
// than the column itself, a narrower or rescaled typmod, another base type,
// even a binary-coercible one like int4 to oid, timestamp to timestamptz
// whatever the TimeZone) changes or reinterprets values.
#include "pg.hpp"
#include "guard/rewrites.hpp"

extern "C" {
#include "catalog/pg_attribute.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_node.h"
#include "parser/parse_type.h"
#include "utils/syscache.h"
}

namespace {

// The ALTER TABLE approved at its ddl_command_start (see rewrites.hpp).
const Node *approved_statement = NULL;

bool keeps_text(Oid from, Oid to) {
    from = getBaseType(from);
    to = getBaseType(to);
    if (from == to) return true;
    return (from == TEXTOID || from == VARCHAROID) && (to == TEXTOID || to == VARCHAROID);
}

// Whether `using_expr` (raw) is the bare column `column`.
bool is_the_column(Node *using_expr, const char *column) {
    if (!IsA(using_expr, ColumnRef)) return false;
    List *fields = ((ColumnRef *)using_expr)->fields;
    return list_length(fields) == 1 && IsA(linitial(fields), String) && strcmp(strVal(linitial(fields)), column) == 0;
}

}  // namespace

const char *changefeed_type_change_problem(Oid relid, AlterTableCmd *cmd) {
    ColumnDef *def = (ColumnDef *)cmd->def;
    if (cmd->name == NULL || def == NULL || !IsA(def, ColumnDef) || def->typeName == NULL) return NULL;
    if (def->raw_default != NULL && !is_the_column(def->raw_default, cmd->name))
        return psprintf("its USING expression computes new values for column %s", quote_identifier(cmd->name));

    // What PostgreSQL will find: a missing column or type is its own error.
    HeapTuple att_tuple = SearchSysCacheAttName(relid, cmd->name);
    if (!HeapTupleIsValid(att_tuple)) return NULL;
    Form_pg_attribute att = (Form_pg_attribute)GETSTRUCT(att_tuple);
    AttrNumber attnum = att->attnum;
    Oid old_type = att->atttypid;
    int32 old_typmod = att->atttypmod;
    Oid collation = att->attcollation;
    ReleaseSysCache(att_tuple);
    if (attnum <= 0) return NULL;
    int32 new_typmod = -1;
    Type type_tuple = LookupTypeName(NULL, def->typeName, &new_typmod, true);
    if (type_tuple == NULL) return NULL;
    Oid new_type = typeTypeId(type_tuple);
    bool defined = ((Form_pg_type)GETSTRUCT(type_tuple))->typisdefined;
    ReleaseSysCache(type_tuple);
    if (!defined) return NULL;

    // The conversion ALTER TABLE builds (ATPrepAlterColumnType), simplified
    // by the planner as it is before PostgreSQL decides on a rewrite.
    ParseState *pstate = make_parsestate(NULL);
    Node *conversion = coerce_to_target_type(pstate, (Node *)makeVar(1, attnum, old_type, old_typmod, collation, 0),
                                             old_type, new_type, new_typmod, COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST,
                                             -1);
    free_parsestate(pstate);
    if (conversion == NULL) return NULL;  // no cast: PostgreSQL refuses it
    conversion = (Node *)expression_planner((Expr *)conversion);
    for (;;) {
        if (IsA(conversion, Var)) return NULL;
        if (IsA(conversion, CoerceToDomain)) {
            conversion = (Node *)((CoerceToDomain *)conversion)->arg;
        } else if (IsA(conversion, RelabelType) && keeps_text(exprType((Node *)((RelabelType *)conversion)->arg),
                                                              ((RelabelType *)conversion)->resulttype)) {
            conversion = (Node *)((RelabelType *)conversion)->arg;
        } else {
            break;
        }
    }
    return psprintf("converting column %s from %s to %s changes or reinterprets its stored values",
                    quote_identifier(cmd->name), format_type_with_typemod(old_type, old_typmod),
                    format_type_with_typemod(new_type, new_typmod));
}

void changefeed_approve_rewrite(const Node *stmt) {
    approved_statement = stmt;
}

bool changefeed_rewrite_approved(const Node *stmt) {
    return stmt != NULL && stmt == approved_statement;
}

void changefeed_forget_rewrite(void) {
    approved_statement = NULL;
}
