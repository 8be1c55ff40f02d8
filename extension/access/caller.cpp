// Entry points that run as their caller and hand the call to a SECURITY
// DEFINER implementation.
//
// Inside a SECURITY DEFINER function the caller is gone: current_user is the
// function's owner, and session_user ignores SET ROLE and enclosing SECURITY
// DEFINER functions.  So each function of the SQL surface is this C function,
// running as the caller: it notes the caller's role on a small stack and calls
// the implementation of the same name with a leading underscore (a SECURITY
// DEFINER function nobody else may execute), which asks changefeed.caller()
// whose rights to check.  The stack is popped however the call ends.
#include "pg.hpp"
#include "access/caller.hpp"

extern "C" {
#include "catalog/pg_proc.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(changefeed_call_definer);
PG_FUNCTION_INFO_V1(changefeed_caller);
}

namespace {

constexpr int kMaxDepth = 32;  // nested entry points (lag() reads, for example)
Oid callers[kMaxDepth];
int depth = 0;

// The implementation of an entry point, looked up once per call site.
struct Implementation {
    FmgrInfo flinfo;
};

Implementation *implementation_of(FunctionCallInfo fcinfo) {
    Oid outer = fcinfo->flinfo->fn_oid;
    HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(outer));
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "changefeed: cache lookup failed for function %u", outer);
    Form_pg_proc proc = (Form_pg_proc)GETSTRUCT(tuple);
    char name[NAMEDATALEN + 1];
    snprintf(name, sizeof name, "_%s", NameStr(proc->proname));
    char *schema = get_namespace_name(proc->pronamespace);
    int nargs = proc->pronargs;
    Oid argtypes[FUNC_MAX_ARGS];
    memcpy(argtypes, proc->proargtypes.values, nargs * sizeof(Oid));
    ReleaseSysCache(tuple);

    Oid inner = LookupFuncName(list_make2(makeString(schema), makeString(pstrdup(name))), nargs, argtypes, true);
    if (!OidIsValid(inner))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_FUNCTION),
                        errmsg("changefeed: implementation %s.%s of function %u is missing", schema, name, outer),
                        errhint("Reinstall the extension.")));
    Implementation *impl = (Implementation *)MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(Implementation));
    fmgr_info_cxt(inner, &impl->flinfo, fcinfo->flinfo->fn_mcxt);
    impl->flinfo.fn_expr = fcinfo->flinfo->fn_expr;
    fcinfo->flinfo->fn_extra = impl;
    return impl;
}

}  // namespace

Oid changefeed_current_caller(void) {
    return depth > 0 ? callers[depth - 1] : GetUserId();
}

extern "C" {

// The SQL surface's functions: calls `_<name>` with the same arguments, and
// the same result set for set-returning functions.
Datum changefeed_call_definer(PG_FUNCTION_ARGS) {
    Implementation *impl = (Implementation *)fcinfo->flinfo->fn_extra;
    if (impl == NULL) impl = implementation_of(fcinfo);
    if (depth >= kMaxDepth)
        ereport(ERROR, (errcode(ERRCODE_STATEMENT_TOO_COMPLEX), errmsg("changefeed functions nested too deeply")));

    LOCAL_FCINFO(inner, FUNC_MAX_ARGS);
    InitFunctionCallInfoData(*inner, &impl->flinfo, fcinfo->nargs, fcinfo->fncollation, fcinfo->context,
                             fcinfo->resultinfo);
    for (int i = 0; i < fcinfo->nargs; i++) inner->args[i] = fcinfo->args[i];

    Datum result = (Datum)0;
    callers[depth++] = GetUserId();
    // One-statement PG_TRY blocks keep their braces on their own lines:
    // clang-format 14 would join them.
    // clang-format off
    PG_TRY();
    {
        result = FunctionCallInvoke(inner);
    }
    PG_FINALLY();
    {
        depth--;
    }
    PG_END_TRY();
    // clang-format on
    fcinfo->isnull = inner->isnull;
    return result;
}

// changefeed.caller(): the role that called the innermost entry point (its
// current_user then); outside any entry point, the current user.
Datum changefeed_caller(PG_FUNCTION_ARGS) {
    PG_RETURN_OID(changefeed_current_caller());
}

}  // extern "C"
