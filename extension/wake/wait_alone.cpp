// A long poll (read_ranges(..., wait)) lets go of its backend's xmin while it
// sleeps, so vacuum may remove rows its statement's snapshot would still
// see.  That is safe only if nothing reads with that snapshot after the
// wait: the statement must be the read alone, as the client sends it
// (SELECT * FROM changefeed.read_ranges(...), with at most ordering, limits,
// aggregates, casts and filters of its own columns above it).  A join, a
// subquery evaluated after the call, a function that may read tables, or a
// call inside another function (whose caller's snapshot outlives it) is not.
#include "pg.hpp"
#include "wake/wait_alone.hpp"

extern "C" {
#include "access/transam.h"
#include "catalog/pg_proc.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "tcop/pquery.h"
#include "utils/lsyscache.h"
#include "utils/portal.h"
}

namespace {

bool may_read(Oid func, void *) {
    char volatility = func_volatile(func);
    if (volatility == PROVOLATILE_IMMUTABLE) return false;
    if (volatility == PROVOLATILE_VOLATILE || func >= FirstNormalObjectId) return true;
    // Built-in stable functions depend on settings, not tables; the XML
    // exports of a query, table or schema are the exception.
    char *name = get_func_name(func);
    return name == NULL || strstr(name, "_to_xml") != NULL;
}

bool reads_something(Node *node, void *context);

bool walk(Node *node, void *context) {
#if PG_VERSION_NUM >= 160000
    return expression_tree_walker(node, reads_something, context);
#else
    return expression_tree_walker(node, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(reads_something)),
                                  context);
#endif
}

// Whether an expression evaluated after the function returned could read
// with the statement's snapshot: a subquery, a value one computes later, a
// user's function that is not immutable, or a volatile one.
bool reads_something(Node *node, void *context) {
    if (node == NULL) return false;
    if (IsA(node, SubLink) || IsA(node, SubPlan) || IsA(node, AlternativeSubPlan)) return true;
    if (IsA(node, Param) && ((Param *)node)->paramkind == PARAM_EXEC) return true;
    if (check_functions_in_node(node, may_read, context)) return true;
    return walk(node, context);
}

bool reads_nothing(Node *expr) {
    return !reads_something(expr, NULL);
}

// `self`: the call's expression in the plan (the entry point's, which the
// implementation is handed on).
bool scans_only_self(Plan *plan, Node *self, int *calls) {
    if (plan == NULL) return true;
    if (!reads_nothing((Node *)plan->targetlist) || !reads_nothing((Node *)plan->qual)) return false;
    switch (nodeTag(plan)) {
        case T_FunctionScan: {
            // Its arguments are evaluated before the call, so they may read.
            FunctionScan *scan = (FunctionScan *)plan;
            if (list_length(scan->functions) != 1) return false;
            if (((RangeTblFunction *)linitial(scan->functions))->funcexpr != self) return false;
            (*calls)++;
            return true;
        }
        case T_Limit:
            if (!reads_nothing(((Limit *)plan)->limitOffset) || !reads_nothing(((Limit *)plan)->limitCount))
                return false;
            break;
        case T_Result:
            if (!reads_nothing(((Result *)plan)->resconstantqual)) return false;
            break;
        case T_Sort:
        case T_IncrementalSort:
        case T_Material:
        case T_Agg:
        case T_Unique: break;
        default: return false;
    }
    return scans_only_self(plan->lefttree, self, calls) && scans_only_self(plan->righttree, self, calls);
}

}  // namespace

bool changefeed_read_is_statement_alone(FunctionCallInfo fcinfo) {
    ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
    if (rsinfo == NULL || rsinfo->econtext == NULL || fcinfo->flinfo->fn_expr == NULL) return false;
    QueryDesc *query = ActivePortal != NULL ? ActivePortal->queryDesc : NULL;
    if (query == NULL || query->estate == NULL || query->estate != rsinfo->econtext->ecxt_estate) return false;
    if (query->plannedstmt == NULL || query->plannedstmt->commandType != CMD_SELECT ||
        query->plannedstmt->hasModifyingCTE)
        return false;
    int calls = 0;
    return scans_only_self(query->plannedstmt->planTree, fcinfo->flinfo->fn_expr, &calls) && calls == 1;
}
