// Row images in jsonb's binary form, built straight from the tuple.
//
// to_jsonb(row) categorizes every column's type on every row (catalog
// lookups), turns numbers into text and back, pushes each value (and each
// token of a jsonb column) into a tree, sorts the keys and serializes the
// tree.  An image's keys are the table's column names, so their order and
// bytes are known once per statement: here the plan holds them, and each
// row only appends its values.  The layout is the one convertToJsonb()
// writes (utils/jsonb.h): object header, the keys' JEntries, the values'
// JEntries, the keys' bytes, the values' bytes, numerics and containers
// padded to 4 bytes, every JB_OFFSET_STRIDE'th JEntry an end offset.  Each
// value is converted as to_jsonb() converts it (jsonb_categorize_type in
// jsonb.c): sql/row_images.sql compares the two on every covered type.
#include "pg.hpp"
#include "capture/row_image.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "utils/date.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
}

namespace {

// How one column's value becomes a jsonb value.
enum ValueKind {
    kBool,      // true / false
    kInteger,   // int2, int4, int8: a number
    kNumber,    // float4, float8, numeric: a number, or a string for NaN and infinities
    kDateTime,  // date, timestamp, timestamptz: ISO 8601 text, as JSON encodes it
    kJsonb,     // the document itself (a scalar document as that scalar)
    kText,      // text, varchar: the characters
    kOutput,    // any other built-in scalar type: its output text
};

struct ImageColumn {
    AttrNumber attnum;
    ValueKind kind;
    Oid base_type;
    FmgrInfo out;
};

}  // namespace

struct RowImagePlan {
    int ncolumns;
    ImageColumn *columns;  // in the image's key order
    char *head;            // object header and the keys' JEntries
    int head_len;
    char *keys;  // the keys' bytes
    int keys_len;
};

namespace {

// The kind of a column of type `type`, or false where only to_jsonb() knows
// (it may look for a cast to json, or recurse).
bool value_kind(Oid type, ValueKind *kind, Oid *base) {
    Oid t = getBaseType(type);
    *base = t;
    switch (t) {
        case BOOLOID: *kind = kBool; return true;
        case INT2OID:
        case INT4OID:
        case INT8OID: *kind = kInteger; return true;
        case FLOAT4OID:
        case FLOAT8OID:
        case NUMERICOID: *kind = kNumber; return true;
        case DATEOID:
        case TIMESTAMPOID:
        case TIMESTAMPTZOID: *kind = kDateTime; return true;
        case JSONBOID: *kind = kJsonb; return true;
        case TEXTOID:
        case VARCHAROID: *kind = kText; return true;
        case JSONOID: return false;
        default: break;
    }
    if (t >= FirstNormalObjectId) return false;
    if (OidIsValid(get_element_type(t)) || type_is_rowtype(t)) return false;
    if (get_typtype(t) == TYPTYPE_PSEUDO) return false;
    *kind = kOutput;
    return true;
}

// jsonb's key order: shorter first, then bytewise.
int key_order(const void *a, const void *b, void *arg) {
    TupleDesc desc = (TupleDesc)arg;
    const char *x = NameStr(TupleDescAttr(desc, ((const ImageColumn *)a)->attnum - 1)->attname);
    const char *y = NameStr(TupleDescAttr(desc, ((const ImageColumn *)b)->attnum - 1)->attname);
    size_t lx = strlen(x), ly = strlen(y);
    if (lx != ly) return lx < ly ? -1 : 1;
    return memcmp(x, y, lx);
}

// JEntry i of a container: its length, or every JB_OFFSET_STRIDE'th its end offset.
uint32 entry(uint32 type, int i, uint32 len, uint32 end) {
    return (i % JB_OFFSET_STRIDE) == 0 ? (type | end | JENTRY_HAS_OFF) : (type | len);
}

int pad_to_int(StringInfo buf) {
    int pad = INTALIGN(buf->len) - buf->len;
    for (int i = 0; i < pad; i++) appendStringInfoCharMacro(buf, '\0');
    return pad;
}

// Appends one scalar; returns its JEntry type and sets *len to the bytes it took.
uint32 append_scalar(StringInfo buf, const JsonbValue *v, uint32 *len) {
    switch (v->type) {
        case jbvNull: *len = 0; return JENTRY_ISNULL;
        case jbvBool: *len = 0; return v->val.boolean ? JENTRY_ISBOOL_TRUE : JENTRY_ISBOOL_FALSE;
        case jbvString:
            appendBinaryStringInfo(buf, v->val.string.val, v->val.string.len);
            *len = (uint32)v->val.string.len;
            return JENTRY_ISSTRING;
        case jbvNumeric: {
            int pad = pad_to_int(buf);
            int n = VARSIZE_ANY(v->val.numeric);
            appendBinaryStringInfo(buf, (const char *)v->val.numeric, n);
            *len = (uint32)(pad + n);
            return JENTRY_ISNUMERIC;
        }
        default: elog(ERROR, "unexpected jsonb scalar type %d", (int)v->type); return 0;
    }
}

uint32 append_string(StringInfo buf, const char *s, int n, uint32 *len) {
    JsonbValue v;
    v.type = jbvString;
    v.val.string.val = (char *)s;
    v.val.string.len = n;
    return append_scalar(buf, &v, len);
}

uint32 append_numeric(StringInfo buf, Numeric n, uint32 *len) {
    JsonbValue v;
    v.type = jbvNumeric;
    v.val.numeric = n;
    return append_scalar(buf, &v, len);
}

// Appends column `col`'s non-null value `d`.
uint32 append_value(StringInfo buf, const ImageColumn *col, Datum d, uint32 *len) {
    switch (col->kind) {
        case kBool: {
            JsonbValue v;
            v.type = jbvBool;
            v.val.boolean = DatumGetBool(d);
            return append_scalar(buf, &v, len);
        }
        case kInteger: {
            int64 i = col->base_type == INT8OID   ? DatumGetInt64(d)
                      : col->base_type == INT4OID ? (int64)DatumGetInt32(d)
                                                  : (int64)DatumGetInt16(d);
            return append_numeric(buf, int64_to_numeric(i), len);
        }
        case kNumber: {
            char *s = OutputFunctionCall((FmgrInfo *)&col->out, d);
            if (!IsValidJsonNumber(s, strlen(s))) return append_string(buf, s, strlen(s), len);
            Datum n = DirectFunctionCall3(numeric_in, CStringGetDatum(s), ObjectIdGetDatum(InvalidOid),
                                          Int32GetDatum(-1));
            return append_numeric(buf, DatumGetNumeric(n), len);
        }
        case kDateTime: {
            char *s = JsonEncodeDateTime(NULL, d, col->base_type, NULL);
            return append_string(buf, s, strlen(s), len);
        }
        case kText: {
            text *t = DatumGetTextPP(d);
            return append_string(buf, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), len);
        }
        case kOutput: {
            char *s = OutputFunctionCall((FmgrInfo *)&col->out, d);
            return append_string(buf, s, strlen(s), len);
        }
        case kJsonb: {
            Jsonb *j = DatumGetJsonbP(d);
            if (JB_ROOT_IS_SCALAR(j)) {
                JsonbValue v;
                JsonbExtractScalar(&j->root, &v);
                return append_scalar(buf, &v, len);
            }
            // A stored document is what convertToJsonb() wrote for its tree,
            // and its bytes keep their alignment at an aligned offset: the
            // same bytes as writing the tree again.
            int pad = pad_to_int(buf);
            int n = VARSIZE(j) - VARHDRSZ;
            appendBinaryStringInfo(buf, (const char *)&j->root, n);
            *len = (uint32)(pad + n);
            return JENTRY_ISCONTAINER;
        }
    }
    return 0;
}

}  // namespace

RowImagePlan *changefeed_row_image_plan(TupleDesc desc, MemoryContext cxt) {
    int n = 0;
    for (int i = 0; i < desc->natts; i++)
        if (!TupleDescAttr(desc, i)->attisdropped) n++;
    ImageColumn *cols = (ImageColumn *)MemoryContextAllocZero(cxt, sizeof(ImageColumn) * (n > 0 ? n : 1));
    int k = 0;
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attisdropped) continue;
        ImageColumn *c = &cols[k++];
        c->attnum = att->attnum;
        if (!value_kind(att->atttypid, &c->kind, &c->base_type)) {
            pfree(cols);
            return NULL;
        }
        if (c->kind == kNumber || c->kind == kOutput) {
            Oid func;
            bool varlena;
            getTypeOutputInfo(c->base_type, &func, &varlena);
            fmgr_info_cxt(func, &c->out, cxt);
        }
    }
    qsort_arg(cols, n, sizeof(ImageColumn), key_order, desc);

    RowImagePlan *plan = (RowImagePlan *)MemoryContextAllocZero(cxt, sizeof(RowImagePlan));
    plan->ncolumns = n;
    plan->columns = cols;
    plan->head_len = (int)(sizeof(uint32) * (1 + n));
    plan->head = (char *)MemoryContextAlloc(cxt, plan->head_len);
    uint32 header = (uint32)n | JB_FOBJECT;
    memcpy(plan->head, &header, sizeof header);
    StringInfoData keys;
    MemoryContext old = MemoryContextSwitchTo(cxt);
    initStringInfo(&keys);
    MemoryContextSwitchTo(old);
    for (int i = 0; i < n; i++) {
        const char *name = NameStr(TupleDescAttr(desc, cols[i].attnum - 1)->attname);
        uint32 len = (uint32)strlen(name);
        appendBinaryStringInfo(&keys, name, (int)len);
        uint32 e = entry(JENTRY_ISSTRING, i, len, (uint32)keys.len);
        memcpy(plan->head + sizeof(uint32) * (1 + i), &e, sizeof e);
    }
    plan->keys = keys.data;
    plan->keys_len = keys.len;
    return plan;
}

Datum changefeed_row_image(const RowImagePlan *plan, HeapTuple tuple, TupleDesc desc) {
    int n = plan->ncolumns;
    StringInfoData buf;
    initStringInfo(&buf);
    enlargeStringInfo(&buf, VARHDRSZ + plan->head_len + (int)sizeof(uint32) * n + plan->keys_len + 64 * n);
    buf.len = VARHDRSZ;
    appendBinaryStringInfo(&buf, plan->head, plan->head_len);
    int value_entries = buf.len;
    buf.len += (int)sizeof(uint32) * n;
    appendBinaryStringInfo(&buf, plan->keys, plan->keys_len);

    uint64 end = (uint64)plan->keys_len;
    for (int i = 0; i < n; i++) {
        const ImageColumn *col = &plan->columns[i];
        bool isnull;
        Datum d = heap_getattr(tuple, col->attnum, desc, &isnull);
        uint32 len = 0;
        uint32 type = isnull ? JENTRY_ISNULL : append_value(&buf, col, d, &len);
        end += len;
        if (end > JENTRY_OFFLENMASK) {
            pfree(buf.data);
            return (Datum)0;
        }
        uint32 e = entry(type, n + i, len, (uint32)end);
        memcpy(buf.data + value_entries + sizeof(uint32) * i, &e, sizeof e);
    }
    SET_VARSIZE(buf.data, buf.len);
    return PointerGetDatum(buf.data);
}
