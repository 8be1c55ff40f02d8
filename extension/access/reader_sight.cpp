// Reader sight (reader_sight.hpp): a feed shows a reader only what a SELECT
// of theirs on the table would show, row by row and column by column.
//
// Reads run in SECURITY DEFINER implementations, so the rights are the
// caller's (changefeed.caller()), checked here.  Rows: when the table's
// row-level security applies to the caller (check_enable_rls as them), the
// SELECT policies that apply to them are taken as the rewriter would add them
// to their query (get_row_security_policies), once per read, so a changed
// policy applies from the next read on.  Each logged image (to_jsonb of the
// row, capture.cpp) becomes a row of the table again (jsonb_populate_record)
// and the policies are evaluated on it in the scan: an expression prepared
// once per read (ExecPrepareQual).  Sublinks need the planner: those that do
// not refer to the row (a role-mapping table) are run once per read and
// replaced by their value (flatten_sublinks); policies with a sublink on the
// row become a statement prepared as
//   SELECT COALESCE(<policies, deparsed>, false) FROM (SELECT ($1::<table>).*) AS <table>
// and kept while the policies stay the same, run once per change.  Each
// evaluation runs as the caller in a security-restricted operation, with the
// search path the implementations pin (pg_catalog, pg_temp): policy
// functions, sublinks on other tables and the column types' input functions
// run with the caller's rights, never the extension owner's, and cannot
// change role.  Columns: without SELECT on the table, the images keep only
// the columns the caller may SELECT (pg_attribute_aclcheck as them).
//
// Images are judged by column identity, not by name: each was written under
// a schema version of the table (capture/schema.sql) that maps its keys to
// attribute numbers.  The column allow-list keeps a key when the column of
// its number may be selected today (a column renamed since keeps its old key;
// one dropped since, or a key no version knows, is left out), and the
// policies see the image as a row of today's table, each key under the name
// its column has now.
#include "pg.hpp"
#include "access/caller.hpp"
#include "access/reader_sight.hpp"

extern "C" {
#include "access/table.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteManip.h"
#include "rewrite/rowsecurity.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/ruleutils.h"
}

struct ReaderSight {
    Oid reader;
    Oid relid;          // the table, locked while the sight is open
    bool rls;           // row-level security applies to the reader
    EState *estate;     // the memory of one evaluation
    FmgrInfo populate;  // jsonb_populate_record(NULL::<table>, jsonb)
    Oid rowtype;
    // Policies evaluated in the scan, on a row of the table.
    ExprState *qual;
    TupleTableSlot *row;
    // Policies with a sublink on the row: a statement over a row.
    SPIPlanPtr policies;
    ArrayType *hidden;  // text[] of the columns it may not SELECT; null: none
    char **hidden_names;
    int nhidden;
    bool tenant_hidden;
    // The table's columns now, by attribute number (1 .. natts): the name
    // (null: dropped) and whether the reader may SELECT it.
    int32 collection;
    int natts;
    char **now_name;
    bool *visible;
    // The shapes images were written under (schema versions), loaded once.
    struct Shape *shapes;
    int nshapes;
    struct Shape *now;
};

// One schema version of the table: its columns' names and numbers.
struct Shape {
    int32 version;
    int64 since_seq;  // rows logged without a version after this seq are of it (0: from the start)
    int n;
    char **names;
    AttrNumber *attnums;
    bool same_as_now;  // the names and numbers of the table now
};

namespace {

// The statement of the last policies prepared, kept across reads (one entry:
// a backend reads one table as one role, mostly).
struct PreparedPolicies {
    Oid reader;
    char *sql;  // in TopMemoryContext
    SPIPlanPtr plan;
};
PreparedPolicies prepared = {InvalidOid, NULL, NULL};

char *table_name(Relation rel) {
    return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), RelationGetRelationName(rel));
}

// The SELECT policies of `rel` that apply to `reader`, as the rewriter adds
// them to its query; NIL when row-level security does not apply to it.
List *policy_quals(Relation rel, Oid reader, bool *has_sublinks) {
    Oid relid = RelationGetRelid(rel);
    *has_sublinks = false;
    // Raises itself when row_security is off and policies would apply.
    if (check_enable_rls(relid, reader, false) != RLS_ENABLED) return NIL;
    Query *query = makeNode(Query);
    query->commandType = CMD_SELECT;
    RangeTblEntry *rte = makeNode(RangeTblEntry);
    rte->rtekind = RTE_RELATION;
    rte->relid = relid;
    rte->relkind = rel->rd_rel->relkind;
    rte->rellockmode = AccessShareLock;
    query->rtable = list_make1(rte);
    changefeed_select_as(query, rte, reader);
    List *quals = NIL, *checks = NIL;
    bool has_rls = false;
    get_row_security_policies(query, rte, 1, &quals, &checks, &has_rls, has_sublinks);
    // No policy for the reader: the rewriter's default deny, a false qual.
    if (quals == NIL) quals = list_make1(makeBoolConst(false, false));
    return quals;
}

// Sublinks of the policies that do not refer to the row (a role-mapping
// table: tenant IN (SELECT m.tenant FROM map m WHERE m.role = current_user))
// give one value for the whole read, in its snapshot, as the planner would
// compute them once for a SELECT (an init plan): each is run once, as the
// reader, and replaced by its value, so the policies stay in the scan.
// `x op ANY (SELECT ...)` becomes `x op ANY (<array>)` (the same result,
// nulls included), EXISTS (...) a boolean; other sublinks stay.
struct Flattening {
    Relation rel;
    Oid reader;
};

// The value of `sublink` (its deparsed SQL, run once as the reader); false
// when it is not of type `type` (then it stays a sublink).
bool sublink_value(Flattening *f, SubLink *sublink, Oid type, Datum *value, bool *isnull) {
    const char *alias = RelationGetRelationName(f->rel);
    char *expr = deparse_expression((Node *)sublink, deparse_context_for(alias, RelationGetRelid(f->rel)), true, false);
    StringInfoData sql;
    initStringInfo(&sql);
    appendStringInfo(&sql, "SELECT %s", expr);
    MemoryContext cxt = CurrentMemoryContext;
    Oid saved_user;
    int saved_context;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    SetUserIdAndSecContext(f->reader, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    if (SPI_execute(sql.data, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
        elog(ERROR, "changefeed: a sublink of the row-level security policies failed");
    bool typed = SPI_gettypeid(SPI_tuptable->tupdesc, 1) == type;
    Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
    int16 len;
    bool byval;
    get_typlenbyval(type, &len, &byval);
    MemoryContext spi = MemoryContextSwitchTo(cxt);
    if (typed && !*isnull) d = datumCopy(d, byval, len);
    MemoryContextSwitchTo(spi);
    SPI_finish();
    SetUserIdAndSecContext(saved_user, saved_context);
    *value = d;
    return typed;
}

Node *flatten_sublinks(Node *node, void *context) {
    if (node == NULL) return NULL;
    if (IsA(node, SubLink)) {
        Flattening *f = (Flattening *)context;
        SubLink *sublink = (SubLink *)node;
        if (contain_vars_of_level(sublink->subselect, 1)) return (Node *)copyObjectImpl(node);  // refers to the row
        if (sublink->subLinkType == EXISTS_SUBLINK) {
            bool isnull;
            Datum v;
            if (sublink_value(f, sublink, BOOLOID, &v, &isnull))
                return (Node *)makeBoolConst(!isnull && DatumGetBool(v), false);
            return (Node *)copyObjectImpl(node);
        }
        OpExpr *test = sublink->subLinkType == ANY_SUBLINK && sublink->testexpr != NULL &&
                               IsA(sublink->testexpr, OpExpr)
                           ? (OpExpr *)sublink->testexpr
                           : NULL;
        Node *right = test != NULL && list_length(test->args) == 2 ? (Node *)lsecond(test->args) : NULL;
        Param *param = right != NULL && IsA(right, Param) ? (Param *)right : NULL;
        Oid array_type = param != NULL && param->paramkind == PARAM_SUBLINK ? get_array_type(param->paramtype)
                                                                            : InvalidOid;
        if (!OidIsValid(array_type))  // another form: stays a sublink
            return expression_tree_mutator(node, (Node * (*)())(void (*)(void))flatten_sublinks, context);
        SubLink *as_array = makeNode(SubLink);
        as_array->subLinkType = ARRAY_SUBLINK;
        as_array->subLinkId = 0;
        as_array->subselect = sublink->subselect;
        as_array->location = -1;
        bool isnull;
        Datum v;
        if (!sublink_value(f, as_array, array_type, &v, &isnull)) return (Node *)copyObjectImpl(node);
        ScalarArrayOpExpr *any = makeNode(ScalarArrayOpExpr);
        any->opno = test->opno;
        any->opfuncid = test->opfuncid;
        any->useOr = true;
        any->inputcollid = test->inputcollid;
        any->args = list_make2(copyObjectImpl(linitial(test->args)),
                               makeConst(array_type, -1, InvalidOid, -1, v, isnull, false));
        any->location = -1;
        return (Node *)any;
    }
    return expression_tree_mutator(node, (Node * (*)())(void (*)(void))flatten_sublinks, context);
}

// The policies as one statement over an image (sublinks need the planner).
char *policies_statement(Relation rel, List *quals) {
    Oid relid = RelationGetRelid(rel);
    Node *expr = (Node *)make_ands_explicit(quals);
    const char *alias = RelationGetRelationName(rel);
    char *cond = deparse_expression(expr, deparse_context_for(alias, relid), true, false);
    StringInfoData sql;
    initStringInfo(&sql);
    appendStringInfo(&sql, "SELECT COALESCE((%s), false) FROM (SELECT ($1::%s).*) AS %s", cond, table_name(rel),
                     quote_identifier(alias));
    return sql.data;
}

// The prepared statement of `sql`, prepared as the reader (in the search
// path the implementations pin, the one it was deparsed in).
SPIPlanPtr prepare_policies(Oid reader, const char *sql, Oid rowtype) {
    if (prepared.plan != NULL && prepared.reader == reader && strcmp(prepared.sql, sql) == 0) return prepared.plan;
    if (prepared.plan != NULL) {
        SPI_freeplan(prepared.plan);
        pfree(prepared.sql);
        prepared.plan = NULL;
    }
    Oid saved_user;
    int saved_context;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    SetUserIdAndSecContext(reader, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    Oid types[1] = {rowtype};
    SPIPlanPtr plan = SPI_prepare(sql, 1, types);
    if (plan == NULL)
        elog(ERROR, "changefeed: cannot prepare the row-level security policies: %s",
             SPI_result_code_string(SPI_result));
    if (SPI_keepplan(plan) != 0) elog(ERROR, "changefeed: cannot keep the row-level security policies");
    SPI_finish();
    SetUserIdAndSecContext(saved_user, saved_context);
    prepared.reader = reader;
    prepared.sql = MemoryContextStrdup(TopMemoryContext, sql);
    prepared.plan = plan;
    return plan;
}

// The policies without sublinks, prepared on a row of the table, as the
// reader: preparing checks EXECUTE of their functions (ExecInitFunc) for the
// current user, which must be the reader's, as their own SELECT would.
void prepare_quals(ReaderSight *s, Relation rel, List *quals) {
    Oid saved_user;
    int saved_context;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    SetUserIdAndSecContext(s->reader, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
    s->qual = ExecPrepareQual(quals, s->estate);
    SetUserIdAndSecContext(saved_user, saved_context);
    s->row = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(rel)), &TTSOpsHeapTuple);
}

// What turns an image back into a row of the table, and the memory of one
// evaluation.
void prepare_rows(ReaderSight *s, Relation rel) {
    TupleDesc desc = RelationGetDescr(rel);
    s->estate = CreateExecutorState();
    s->rowtype = desc->tdtypeid;
    // jsonb_populate_record() reads its row type from the call expression.
    fmgr_info(F_JSONB_POPULATE_RECORD, &s->populate);
    Node *expr = (Node *)makeFuncExpr(F_JSONB_POPULATE_RECORD, desc->tdtypeid,
                                      list_make2(makeNullConst(desc->tdtypeid, -1, InvalidOid),
                                                 makeNullConst(JSONBOID, -1, InvalidOid)),
                                      InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
    fmgr_info_set_expr(expr, &s->populate);
}

// The row of `image`, in the current memory context.  An image that no
// longer converts (a column's type changed since it was logged) ends the
// read, with a message that shows none of its values: the reader may not be
// allowed to see them.
Datum row_of(ReaderSight *s, Datum image) {
    MemoryContext cxt = CurrentMemoryContext;
    volatile Datum row = (Datum)0;
    PG_TRY();
    {
        LOCAL_FCINFO(call, 2);
        InitFunctionCallInfoData(*call, &s->populate, 2, InvalidOid, NULL, NULL);
        call->args[0].value = (Datum)0, call->args[0].isnull = true;
        call->args[1].value = image, call->args[1].isnull = false;
        row = FunctionCallInvoke(call);
        if (call->isnull) elog(ERROR, "changefeed: jsonb_populate_record returned null");
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(cxt);
        FlushErrorState();
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("cannot check a change against the row-level security policies of its table"),
                        errdetail("A logged image of the row no longer converts to the table's row type: a column's "
                                  "type changed after the change was logged."),
                        errhint("Read past it as a role the policies do not apply to, or move the processor past it "
                                "with changefeed.reset_checkpoint().")));
    }
    PG_END_TRY();
    return row;
}

bool qual_passes(ReaderSight *s, Datum image) {
    ExprContext *econtext = GetPerTupleExprContext(s->estate);
    HeapTupleHeader header = DatumGetHeapTupleHeader(row_of(s, image));
    HeapTupleData tuple;
    tuple.t_len = HeapTupleHeaderGetDatumLength(header);
    ItemPointerSetInvalid(&tuple.t_self);
    tuple.t_tableOid = InvalidOid;
    tuple.t_data = header;
    ExecStoreHeapTuple(&tuple, s->row, false);
    econtext->ecxt_scantuple = s->row;
    bool passes = ExecQual(s->qual, econtext);  // null is false
    ExecClearTuple(s->row);
    return passes;
}

bool statement_passes(ReaderSight *s, Datum image) {
    Datum args[1] = {row_of(s, image)};
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    if (SPI_execute_plan(s->policies, args, NULL, true, 1) != SPI_OK_SELECT)
        elog(ERROR, "changefeed: row-level security policies failed");
    bool seen = false;
    if (SPI_processed == 1) {
        bool isnull;
        Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        seen = !isnull && DatumGetBool(d);
    }
    SPI_finish();
    return seen;
}

// ---- shapes: images by column identity -------------------------------------

// The table's columns now, and which the reader may SELECT.
void load_now(ReaderSight *s, Relation rel, bool whole_table) {
    TupleDesc desc = RelationGetDescr(rel);
    s->natts = desc->natts;
    s->now_name = (char **)palloc0(sizeof(char *) * (desc->natts + 1));
    s->visible = (bool *)palloc0(sizeof(bool) * (desc->natts + 1));
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attisdropped) continue;
        s->now_name[att->attnum] = pstrdup(NameStr(att->attname));
        s->visible[att->attnum] = whole_table ||
                                  pg_attribute_aclcheck(s->relid, att->attnum, s->reader, ACL_SELECT) == ACLCHECK_OK;
    }
    Shape *now = (Shape *)palloc0(sizeof(Shape));
    now->version = kShapeNow;
    now->names = (char **)palloc(sizeof(char *) * Max(desc->natts, 1));
    now->attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * Max(desc->natts, 1));
    for (int a = 1; a <= desc->natts; a++) {
        if (s->now_name[a] == NULL) continue;
        now->names[now->n] = s->now_name[a];
        now->attnums[now->n++] = (AttrNumber)a;
    }
    now->same_as_now = true;
    s->now = now;
}

// The schema versions of the collection (changefeed.schema_attnums()).
void load_shapes(ReaderSight *s) {
    static SPIPlanPtr plan = NULL;
    MemoryContext cxt = CurrentMemoryContext;
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    if (plan == NULL) {
        Oid types[1] = {INT4OID};
        plan = SPI_prepare("SELECT v.version, v.attnums, v.since_seq FROM changefeed.schema_attnums($1) v", 1, types);
        if (plan == NULL || SPI_keepplan(plan) != 0)
            elog(ERROR, "changefeed: cannot prepare the schema versions lookup");
    }
    Datum args[1] = {Int32GetDatum(s->collection)};
    if (SPI_execute_plan(plan, args, NULL, true, 0) != SPI_OK_SELECT)
        elog(ERROR, "changefeed: schema versions lookup failed");
    MemoryContext spi = MemoryContextSwitchTo(cxt);
    int nshapes = (int)SPI_processed;
    Shape *shapes = (Shape *)palloc0(sizeof(Shape) * Max(nshapes, 1));
    for (int i = 0; i < nshapes; i++) {
        bool isnull;
        Shape *shape = &shapes[i];
        shape->version = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
        Datum since = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull);
        shape->since_seq = isnull ? 0 : DatumGetInt64(since);
        Jsonb *attnums = DatumGetJsonbP(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
        int n = (int)JB_ROOT_COUNT(attnums);
        shape->names = (char **)palloc(sizeof(char *) * Max(n, 1));
        shape->attnums = (AttrNumber *)palloc(sizeof(AttrNumber) * Max(n, 1));
        JsonbIterator *it = JsonbIteratorInit(&attnums->root);
        JsonbValue v;
        JsonbIteratorToken tok;
        char *key = NULL;
        while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
            if (tok == WJB_KEY) {
                key = pnstrdup(v.val.string.val, v.val.string.len);
            } else if (tok == WJB_VALUE && key != NULL && v.type == jbvNumeric && shape->n < n) {
                shape->names[shape->n] = key;
                shape->attnums[shape->n++] = (AttrNumber)DatumGetInt32(
                    DirectFunctionCall1(numeric_int4, NumericGetDatum(v.val.numeric)));
                key = NULL;
            }
        }
        int same = 0;
        for (int k = 0; k < shape->n; k++) {
            AttrNumber a = shape->attnums[k];
            if (a >= 1 && a <= s->natts && s->now_name[a] != NULL && strcmp(s->now_name[a], shape->names[k]) == 0)
                same++;
        }
        shape->same_as_now = same == shape->n && same == s->now->n;
    }
    MemoryContextSwitchTo(spi);
    SPI_finish();
    s->shapes = shapes;
    s->nshapes = nshapes;
}

// The shape of `version` (0: the first); an unknown version has no columns,
// so nothing of its images is shown or tested as a known column.
const Shape *shape_of(ReaderSight *s, int32 version) {
    static const Shape unknown = {0, 0, 0, NULL, NULL, false};
    if (version == kShapeNow) return s->now;
    if (s->shapes == NULL) load_shapes(s);
    if (version == 0) return s->nshapes > 0 ? &s->shapes[0] : &unknown;
    for (int i = 0; i < s->nshapes; i++)
        if (s->shapes[i].version == version) return &s->shapes[i];
    return &unknown;
}

}  // namespace

// A row logged without a version (its writer could not look it up, or it was
// logged before versions were kept): the last version whose schema change
// came before it in the log, else the first.
int32 reader_version_at(ReaderSight *s, int64 seq) {
    if (s == NULL) return 0;
    if (s->shapes == NULL) load_shapes(s);
    int32 version = 0;
    for (int i = 0; i < s->nshapes; i++)  // in version order, their seqs rising
        if (s->shapes[i].since_seq < seq) version = s->shapes[i].version;
    return version;
}

namespace {

// The attribute number of key `name` in `shape`, or 0.
AttrNumber attnum_in(const Shape *shape, const char *name, int len) {
    for (int k = 0; k < shape->n; k++)
        if ((int)strlen(shape->names[k]) == len && memcmp(shape->names[k], name, len) == 0) return shape->attnums[k];
    return 0;
}

// Object `image` with the pairs whose column (by `shape`) exists now and,
// with `only_visible`, the reader may SELECT; keyed by their logged names or
// (`as_now`) by their columns' names now.
Datum rebuild(ReaderSight *s, const Shape *shape, Datum image, bool only_visible, bool as_now) {
    Jsonb *jb = DatumGetJsonbP(image);
    if (!JB_ROOT_IS_OBJECT(jb)) return image;
    JsonbParseState *state = NULL;
    JsonbValue *result = NULL;
    JsonbIterator *it = JsonbIteratorInit(&jb->root);
    JsonbValue v;
    JsonbIteratorToken tok;
    bool keep = false;
    while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
        if (tok == WJB_KEY) {
            AttrNumber a = attnum_in(shape, v.val.string.val, v.val.string.len);
            keep = a >= 1 && a <= s->natts && s->now_name[a] != NULL && (!only_visible || s->visible[a]);
            if (!keep) continue;
            if (as_now) {
                v.val.string.val = s->now_name[a];
                v.val.string.len = (int)strlen(s->now_name[a]);
            }
            result = pushJsonbValue(&state, tok, &v);
        } else if (tok == WJB_VALUE) {
            if (keep) result = pushJsonbValue(&state, tok, &v);
            keep = false;
        } else {
            result = pushJsonbValue(&state, tok, NULL);
        }
    }
    return JsonbPGetDatum(JsonbValueToJsonb(result));
}

// The image as a row of today's table would show it, for the policies.
Datum image_as_now(ReaderSight *s, int32 version, Datum image) {
    const Shape *shape = shape_of(s, version);
    return shape->same_as_now ? image : rebuild(s, shape, image, false, true);
}

// Whether the reader may see the column of a schema change's list element.
bool element_visible(const ReaderSight *s, JsonbValue *elem) {
    if (elem->type != jbvBinary) return false;
    JsonbValue *attnum = getKeyJsonValueFromContainer(elem->val.binary.data, "attnum", 6, NULL);
    if (attnum == NULL || attnum->type != jbvNumeric) return false;
    int32 a = DatumGetInt32(DirectFunctionCall1(numeric_int4, NumericGetDatum(attnum->val.numeric)));
    return a >= 1 && a <= s->natts && s->now_name[a] != NULL && s->visible[a];
}

// Whether the reader may see the row of `image`, by the policies: as the
// reader, security-restricted; an error restores the user with the
// (sub)transaction's abort.
bool sees_row(ReaderSight *s, int32 version, Datum image) {
    image = image_as_now(s, version, image);
    Oid saved_user;
    int saved_context;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    SetUserIdAndSecContext(s->reader, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
    ExprContext *econtext = GetPerTupleExprContext(s->estate);
    ResetExprContext(econtext);
    MemoryContext caller = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
    bool seen = s->qual != NULL ? qual_passes(s, image) : statement_passes(s, image);
    MemoryContextSwitchTo(caller);
    SetUserIdAndSecContext(saved_user, saved_context);
    return seen;
}

}  // namespace

ReaderSight *reader_sight_for(int32 collection) {
    static SPIPlanPtr plan = NULL;
    MemoryContext cxt = CurrentMemoryContext;
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    if (plan == NULL) {
        Oid types[1] = {INT4OID};
        plan = SPI_prepare("SELECT c.relid::pg_catalog.oid, c.tenant_column FROM changefeed.collection c"
                           " WHERE c.id OPERATOR(pg_catalog.=) $1",
                           1, types);
        if (plan == NULL || SPI_keepplan(plan) != 0) elog(ERROR, "changefeed: cannot prepare the collection lookup");
    }
    Datum args[1] = {Int32GetDatum(collection)};
    if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
        elog(ERROR, "changefeed: collection lookup failed");
    if (SPI_processed != 1) elog(ERROR, "changefeed: collection %d does not exist", collection);
    bool isnull;
    Oid relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    char *tenant_column = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
    if (tenant_column != NULL) tenant_column = MemoryContextStrdup(cxt, tenant_column);
    SPI_finish();

    Oid reader = changefeed_current_caller();
    // A reader that sees everything costs two catalog lookups, and no lock
    // on the table.  (check_enable_rls raises itself when row_security is
    // off and policies would apply.)
    bool whole_table = pg_class_aclcheck(relid, reader, ACL_SELECT) == ACLCHECK_OK;
    if (whole_table && check_enable_rls(relid, reader, false) != RLS_ENABLED) return NULL;
    Relation rel = table_open(relid, AccessShareLock);  // as a SELECT locks it, until the transaction ends
    ReaderSight *s = (ReaderSight *)palloc0(sizeof(ReaderSight));
    s->reader = reader;
    s->relid = relid;
    s->collection = collection;
    if (!whole_table) {
        TupleDesc desc = RelationGetDescr(rel);
        Datum *names = (Datum *)palloc(sizeof(Datum) * Max(desc->natts, 1));
        s->hidden_names = (char **)palloc(sizeof(char *) * Max(desc->natts, 1));
        int visible = 0;
        for (int i = 0; i < desc->natts; i++) {
            Form_pg_attribute att = TupleDescAttr(desc, i);
            if (att->attisdropped) continue;
            if (pg_attribute_aclcheck(relid, att->attnum, reader, ACL_SELECT) == ACLCHECK_OK) {
                visible++;
                continue;
            }
            s->hidden_names[s->nhidden] = pstrdup(NameStr(att->attname));
            names[s->nhidden++] = CStringGetTextDatum(NameStr(att->attname));
            if (tenant_column != NULL && strcmp(tenant_column, NameStr(att->attname)) == 0) s->tenant_hidden = true;
        }
        if (visible == 0)
            ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                            errmsg("permission denied to read the change feed of %s", table_name(rel)),
                            errdetail("Reading a feed needs SELECT on its table; %s does not have it.",
                                      GetUserNameFromId(reader, true))));
        if (s->nhidden > 0) s->hidden = construct_array(names, s->nhidden, TEXTOID, -1, false, TYPALIGN_INT);
    }
    bool has_sublinks;
    List *quals = policy_quals(rel, reader, &has_sublinks);
    s->rls = quals != NIL;
    if (s->rls) prepare_rows(s, rel);
    if (s->rls && has_sublinks) {
        Flattening f = {rel, reader};
        List *flat = (List *)flatten_sublinks((Node *)quals, &f);
        has_sublinks = checkExprHasSubLink((Node *)flat);
        if (!has_sublinks) quals = flat;
    }
    if (s->rls && has_sublinks)
        s->policies = prepare_policies(reader, policies_statement(rel, quals), s->rowtype);
    else if (s->rls)
        prepare_quals(s, rel, quals);
    if (!s->rls && s->hidden == NULL) {  // it sees everything after all: read as without a sight
        table_close(rel, AccessShareLock);
        pfree(s);
        return NULL;
    }
    load_now(s, rel, s->hidden == NULL);
    table_close(rel, NoLock);
    return s;
}

char reader_sight_op(ReaderSight *s, char seen, int32 version, Datum current, bool current_null, Datum previous,
                     bool previous_null) {
    if (s == NULL || !s->rls || seen == 't' || seen == 's' || seen == 0) return seen;
    switch (seen) {
        case 'c': return !current_null && sees_row(s, version, current) ? 'c' : 0;
        case 'd': return !previous_null && sees_row(s, version, previous) ? 'd' : 0;
        default: break;
    }
    bool now = !current_null && sees_row(s, version, current);
    if (previous_null) return now ? seen : 0;  // no image before: nothing tells a move in
    bool was = sees_row(s, version, previous);
    return now ? (was ? seen : 'c') : (was ? 'd' : 0);
}

Datum reader_visible_image(ReaderSight *s, int32 version, Datum image) {
    if (s == NULL || s->hidden == NULL) return image;
    return rebuild(s, shape_of(s, version), image, true, false);
}

Datum reader_visible_schema(ReaderSight *s, Datum change) {
    if (s == NULL || s->hidden == NULL) return change;
    Jsonb *jb = DatumGetJsonbP(change);
    if (!JB_ROOT_IS_OBJECT(jb)) return change;
    JsonbParseState *state = NULL;
    JsonbValue *result = NULL;
    JsonbIterator *it = JsonbIteratorInit(&jb->root);
    JsonbValue v;
    JsonbIteratorToken tok;
    while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE) {
        if (tok != WJB_VALUE || v.type != jbvBinary || !JsonContainerIsArray(v.val.binary.data)) {
            result = pushJsonbValue(&state, tok, tok == WJB_BEGIN_OBJECT || tok == WJB_END_OBJECT ? NULL : &v);
            continue;
        }
        // A list: of columns (objects with their attnum) or of key names.
        JsonbIterator *elems = JsonbIteratorInit(v.val.binary.data);
        JsonbValue e;
        JsonbIteratorToken etok;
        while ((etok = JsonbIteratorNext(&elems, &e, true)) != WJB_DONE) {
            if (etok == WJB_ELEM && e.type == jbvBinary && !element_visible(s, &e)) continue;
            result = pushJsonbValue(&state, etok, etok == WJB_ELEM ? &e : NULL);
        }
    }
    return JsonbPGetDatum(JsonbValueToJsonb(result));
}

bool reader_sees_tenant(const ReaderSight *s) {
    return s == NULL || !s->tenant_hidden;
}

void reader_sight_check_filter(const ReaderSight *s, Datum filter) {
    if (s == NULL || s->nhidden == 0) return;
    char *path = DatumGetCString(DirectFunctionCall1(jsonpath_out, filter));  // keys come out as ."name"
    for (int i = 0; i < s->nhidden; i++) {
        StringInfoData key;
        initStringInfo(&key);
        appendStringInfoChar(&key, '.');
        escape_json(&key, s->hidden_names[i]);
        if (strstr(path, key.data) != NULL)
            ereport(ERROR,
                    (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                     errmsg("permission denied for column %s in the filter", quote_identifier(s->hidden_names[i])),
                     errdetail("Role %s may not SELECT that column of the table; a filter may test only the "
                               "columns it may see.",
                               GetUserNameFromId(s->reader, true))));
    }
}

void reader_sight_close(ReaderSight *s, bool unlock) {
    if (s == NULL) return;
    if (unlock) UnlockRelationOid(s->relid, AccessShareLock);
    if (s->estate == NULL) return;
    if (s->row != NULL) ExecDropSingleTupleTableSlot(s->row);
    FreeExecutorState(s->estate);
    s->estate = NULL;
    s->qual = NULL;
    s->rls = false;
}
