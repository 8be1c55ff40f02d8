// Current rows (current_rows.hpp): the documents of a collection that logs
// keys alone, read from its table when the feed is read.
//
// Each document is one lookup of its key in the table's primary key index,
// through one index scan kept open for the whole read, in the read's snapshot
// (the statement's, which the log scans use too).  The read runs in a
// SECURITY DEFINER implementation, so the rights are the caller's, checked
// here as a SELECT of theirs would be: SELECT on the table, and no
// row-level security that applies to them (the lookup cannot apply
// policies).  The lookups run as the caller, in a security-restricted
// operation: the key types' input and comparison functions and the columns'
// output functions (to_jsonb) are theirs to run, not the extension owner's.
//
// A document id is the key's text as capture wrote it (a JSON array of the
// texts for a composite key), read back with the key types' input functions
// under the canonical settings it was written with (identity.hpp), whatever
// the reading session's.
#include "pg.hpp"
#include "access/caller.hpp"
#include "capture/identity.hpp"
#include "read/current_rows.hpp"
#include "sqlstates.hpp"

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "executor/tuptable.h"
#include "nodes/makefuncs.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/ruleutils.h"
#include "utils/snapmgr.h"
}

struct CurrentRows {
    int32 collection;
    Oid relid;
    bool keys_only;
    int nkeys;
    char **key_names;
    char *tenant_name;  // NULL: no tenant column
    bool open;
    Oid reader;
    Relation heap;
    Relation index;
    IndexScanDesc scan;
    TupleTableSlot *slot;
    ScanKeyData keys[INDEX_MAX_KEYS];
    Oid input[INDEX_MAX_KEYS];
    Oid ioparam[INDEX_MAX_KEYS];
    int32 typmod[INDEX_MAX_KEYS];
    AttrNumber tenant;
    FmgrInfo tenant_out;
    FmgrInfo to_jsonb;
};

namespace {

char *table_name(Relation rel) {
    return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), RelationGetRelationName(rel));
}

// The table's primary key index, when its columns are the collection's key in order.
Relation primary_key_index(CurrentRows *r) {
    TupleDesc desc = RelationGetDescr(r->heap);
    List *indexes = RelationGetIndexList(r->heap);
    ListCell *lc;
    foreach (lc, indexes) {
        Relation index = index_open(lfirst_oid(lc), AccessShareLock);
        Form_pg_index ix = index->rd_index;
        bool fits = ix->indisprimary && ix->indisvalid && index->rd_rel->relam == BTREE_AM_OID &&
                    ix->indnkeyatts == r->nkeys;
        for (int i = 0; fits && i < r->nkeys; i++) {
            AttrNumber att = ix->indkey.values[i];
            fits = att > 0 && strcmp(NameStr(TupleDescAttr(desc, att - 1)->attname), r->key_names[i]) == 0;
        }
        if (fits) return index;
        index_close(index, AccessShareLock);
    }
    ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                    errmsg("table %s has no primary key on the key columns of its change feed", table_name(r->heap)),
                    errdetail("Its collection logs keys alone (images => 'keys'): a read looks the rows up by key."),
                    errhint("Restore the primary key, or log images with changefeed.alter(tbl, images => 'full').")));
    return NULL;
}

void open_rows(CurrentRows *r) {
    r->reader = changefeed_current_caller();
    r->heap = table_open(r->relid, AccessShareLock);  // as a SELECT locks it, until the transaction ends
    if (pg_class_aclcheck(r->relid, r->reader, ACL_SELECT) != ACLCHECK_OK)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("permission denied to read the change feed of %s", table_name(r->heap)),
                        errdetail("Its collection logs keys alone: the feed reads the rows from the table, which "
                                  "needs SELECT on it; role %s does not have it.",
                                  GetUserNameFromId(r->reader, true))));
    // Raises itself when row_security is off and policies would apply.
    if (check_enable_rls(r->relid, r->reader, false) == RLS_ENABLED)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("permission denied to read the change feed of %s", table_name(r->heap)),
                        errdetail("The table has row-level security that applies to role %s; the feed reads rows "
                                  "by key and cannot apply the policies.",
                                  GetUserNameFromId(r->reader, true)),
                        errhint("Read it as a role the policies do not apply to (the owner, BYPASSRLS).")));
    r->index = primary_key_index(r);
    TupleDesc desc = RelationGetDescr(r->heap);
    for (int i = 0; i < r->nkeys; i++) {
        Oid opfamily = r->index->rd_opfamily[i], opcintype = r->index->rd_opcintype[i];
        Oid op = get_opfamily_member(opfamily, opcintype, opcintype, BTEqualStrategyNumber);
        if (!OidIsValid(op)) elog(ERROR, "changefeed: no equality operator for key column %d", i + 1);
        ScanKeyEntryInitialize(&r->keys[i], 0, i + 1, BTEqualStrategyNumber, InvalidOid, r->index->rd_indcollation[i],
                               get_opcode(op), (Datum)0);
        Form_pg_attribute att = TupleDescAttr(desc, r->index->rd_index->indkey.values[i] - 1);
        getTypeInputInfo(att->atttypid, &r->input[i], &r->ioparam[i]);
        r->typmod[i] = att->atttypmod;
    }
    if (r->tenant_name != NULL) {
        r->tenant = get_attnum(r->relid, r->tenant_name);
        if (r->tenant == InvalidAttrNumber)
            ereport(ERROR, (errcode(changefeed::kWriteRefused),
                            errmsg("table %s has no tenant column \"%s\"", table_name(r->heap), r->tenant_name)));
        Oid out;
        bool varlena;
        getTypeOutputInfo(TupleDescAttr(desc, r->tenant - 1)->atttypid, &out, &varlena);
        fmgr_info(out, &r->tenant_out);
    }
    // to_jsonb() reads its argument type from the call expression, as in capture.cpp.
    fmgr_info(F_TO_JSONB, &r->to_jsonb);
    Node *expr = (Node *)makeFuncExpr(F_TO_JSONB, JSONBOID, list_make1(makeNullConst(desc->tdtypeid, -1, InvalidOid)),
                                      InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
    fmgr_info_set_expr(expr, &r->to_jsonb);
    r->slot = table_slot_create(r->heap, NULL);
    r->scan = index_beginscan(r->heap, r->index, GetActiveSnapshot(), r->nkeys, 0);
    r->open = true;
}

Datum key_value(CurrentRows *r, int i, char *text) {
    return OidInputFunctionCall(r->input[i], text, r->ioparam[i], r->typmod[i]);
}

// The scan keys of document `doc_id`; false when it cannot be a key of the table.
bool set_keys(CurrentRows *r, text *doc_id) {
    char *s = text_to_cstring(doc_id);
    if (r->nkeys == 1) {
        r->keys[0].sk_argument = key_value(r, 0, s);
        return true;
    }
    Jsonb *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(s)));
    if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb) || (int)JB_ROOT_COUNT(jb) != r->nkeys) return false;
    for (int i = 0; i < r->nkeys; i++) {
        JsonbValue *v = getIthJsonbValueFromContainer(&jb->root, (uint32)i);
        if (v == NULL || v->type != jbvString) return false;  // a null key part: no such row
        r->keys[i].sk_argument = key_value(r, i, pnstrdup(v->val.string.val, v->val.string.len));
    }
    return true;
}

// set_keys() and the tenant's text, under the canonical settings.
struct KeyCall {
    CurrentRows *r;
    text *doc_id;
    bool found;
    Datum tenant;
};

void parse_key(void *arg) {
    KeyCall *k = (KeyCall *)arg;
    k->found = set_keys(k->r, k->doc_id);
}

void tenant_text(void *arg) {
    KeyCall *k = (KeyCall *)arg;
    IdentityValue v;
    v.value = slot_getattr(k->r->slot, k->r->tenant, &v.isnull);
    v.out = &k->r->tenant_out;
    char *s = changefeed_identity_text(&v);
    k->tenant = s ? CStringGetTextDatum(s) : (Datum)0;
}

bool lookup(CurrentRows *r, text *doc_id, Datum *document, Datum *tenant) {
    KeyCall k = {r, doc_id, false, (Datum)0};
    changefeed_canonical(parse_key, &k);
    if (!k.found) return false;
    index_rescan(r->scan, r->keys, r->nkeys, NULL, 0);
    if (!index_getnext_slot(r->scan, ForwardScanDirection, r->slot)) return false;
    *document = FunctionCall1(&r->to_jsonb, ExecFetchSlotHeapTupleDatum(r->slot));
    if (r->tenant > 0) changefeed_canonical(tenant_text, &k);
    *tenant = k.tenant;
    ExecClearTuple(r->slot);
    return true;
}

}  // namespace

CurrentRows *current_rows_for(int32 collection) {
    static SPIPlanPtr plan = NULL;
    MemoryContext cxt = CurrentMemoryContext;
    CurrentRows *r = (CurrentRows *)palloc0(sizeof(CurrentRows));
    r->collection = collection;
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    if (plan == NULL) {
        Oid types[1] = {INT4OID};
        plan = SPI_prepare("SELECT c.relid::pg_catalog.oid, c.images OPERATOR(pg_catalog.=) 'keys', c.key_columns,"
                           "       c.tenant_column"
                           "  FROM changefeed.collection c WHERE c.id OPERATOR(pg_catalog.=) $1",
                           1, types);
        if (plan == NULL || SPI_keepplan(plan) != 0) elog(ERROR, "changefeed: cannot prepare the collection lookup");
    }
    Datum args[1] = {Int32GetDatum(collection)};
    if (SPI_execute_plan(plan, args, NULL, true, 1) != SPI_OK_SELECT)
        elog(ERROR, "changefeed: collection lookup failed");
    if (SPI_processed != 1)
        ereport(ERROR,
                (errcode(changefeed::kNotEnabled), errmsg("changefeed collection %d does not exist", collection)));
    HeapTuple t = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool isnull;
    r->relid = DatumGetObjectId(SPI_getbinval(t, desc, 1, &isnull));
    r->keys_only = DatumGetBool(SPI_getbinval(t, desc, 2, &isnull));
    Datum *elems;
    bool *nulls;
    deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(t, desc, 3, &isnull)), TEXTOID, -1, false, TYPALIGN_INT, &elems,
                      &nulls, &r->nkeys);
    if (r->nkeys < 1 || r->nkeys > INDEX_MAX_KEYS) elog(ERROR, "changefeed: collection %d has no key", collection);
    r->key_names = (char **)MemoryContextAlloc(cxt, sizeof(char *) * r->nkeys);
    for (int i = 0; i < r->nkeys; i++) r->key_names[i] = MemoryContextStrdup(cxt, TextDatumGetCString(elems[i]));
    Datum tenant = SPI_getbinval(t, desc, 4, &isnull);
    r->tenant_name = isnull ? NULL : MemoryContextStrdup(cxt, TextDatumGetCString(tenant));
    SPI_finish();
    return r;
}

bool current_rows_keys_only(const CurrentRows *rows) {
    return rows->keys_only;
}

bool current_row(CurrentRows *r, text *doc_id, Datum *document, Datum *tenant) {
    if (!r->open) open_rows(r);
    // As the reader; an error restores the user with the (sub)transaction's abort.
    Oid saved_user;
    int saved_context;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    SetUserIdAndSecContext(r->reader, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
    bool found = lookup(r, doc_id, document, tenant);
    SetUserIdAndSecContext(saved_user, saved_context);
    return found;
}

void current_rows_close(CurrentRows *r, bool unlock) {
    if (r == NULL || !r->open) return;
    r->open = false;
    index_endscan(r->scan);
    ExecDropSingleTupleTableSlot(r->slot);
    index_close(r->index, AccessShareLock);
    table_close(r->heap, unlock ? AccessShareLock : NoLock);
}
