// Canonical document identity (identity.hpp): the texts of a row's key,
// partition key and tenant, whatever the session that computes them.
//
// The output functions of the date/time, float and bytea types read a few C
// globals that the session's settings set.  Rather than reformat each type,
// the texts are made with those globals set to fixed values for the while
// (one swap per row, not per column; arrays, composites and ranges format
// their elements through the same globals).  Values whose text depends on
// the locale or the catalog (money, the reg* types) cannot be fixed this
// way: enable() refuses them as identity columns (capture/identity.sql).
#include "pg.hpp"
#include "capture/identity.hpp"

extern "C" {
#include "catalog/pg_type.h"
#include "pgtime.h"
#include "utils/bytea.h"
#include "utils/float.h"
#include "utils/json.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(changefeed_canonical_text);
PG_FUNCTION_INFO_V1(changefeed_session_formatted);
}

namespace {

struct OutputSettings {
    pg_tz *timezone;
    int date_style;
    int date_order;
    int interval_style;
    int float_digits;
    int bytea;
};

bool active = false;
pg_tz *utc = NULL;

void save_settings(OutputSettings *s) {
    s->timezone = session_timezone;
    s->date_style = DateStyle;
    s->date_order = DateOrder;
    s->interval_style = IntervalStyle;
    s->float_digits = extra_float_digits;
    s->bytea = bytea_output;
}

void apply_settings(const OutputSettings *s) {
    session_timezone = s->timezone;
    DateStyle = s->date_style;
    DateOrder = s->date_order;
    IntervalStyle = s->interval_style;
    extra_float_digits = s->float_digits;
    bytea_output = s->bytea;
}

}  // namespace

void changefeed_canonical(void (*fn)(void *arg), void *arg) {
    if (active) {  // already canonical (an output function that formats another value)
        fn(arg);
        return;
    }
    if (utc == NULL) {
        utc = pg_tzset("UTC");  // kept by pg_tzset's cache for the backend's life
        if (utc == NULL) elog(ERROR, "changefeed: time zone UTC is not available");
    }
    // extra_float_digits 1: shortest exact text, PostgreSQL's default since 12.
    const OutputSettings canonical = {utc, USE_ISO_DATES, DATEORDER_YMD, INTSTYLE_POSTGRES, 1, BYTEA_OUTPUT_HEX};
    OutputSettings saved;
    save_settings(&saved);
    apply_settings(&canonical);
    active = true;
    // One-statement PG_TRY blocks keep their braces on their own lines:
    // clang-format 14 would join them.
    // clang-format off
    PG_TRY();
    {
        fn(arg);
    }
    PG_FINALLY();
    {
        active = false;
        apply_settings(&saved);
    }
    PG_END_TRY();
    // clang-format on
}

bool changefeed_canonical_active(void) {
    return active;
}

char *changefeed_identity_text(const IdentityValue *v) {
    if (!active) elog(ERROR, "changefeed: an identity text made outside the canonical settings");
    return v->isnull ? NULL : OutputFunctionCall(v->out, v->value);
}

char *changefeed_document_id(const IdentityValue *keys, int n) {
    if (n == 1) {
        char *s = changefeed_identity_text(&keys[0]);
        return s ? s : pstrdup("");
    }
    StringInfoData buf;
    initStringInfo(&buf);
    appendStringInfoChar(&buf, '[');
    for (int i = 0; i < n; i++) {
        char *s = changefeed_identity_text(&keys[i]);
        if (i) appendStringInfoChar(&buf, ',');
        if (s)
            escape_json(&buf, s);
        else
            appendStringInfoString(&buf, "null");
    }
    appendStringInfoChar(&buf, ']');
    return buf.data;
}

char *changefeed_partition_key(const IdentityValue *parts, int n) {
    if (n == 1) {
        char *s = changefeed_identity_text(&parts[0]);
        return s ? s : pstrdup("");
    }
    StringInfoData buf;
    initStringInfo(&buf);
    for (int i = 0; i < n; i++) {
        char *s = changefeed_identity_text(&parts[i]);
        if (i) appendStringInfoChar(&buf, '/');
        if (s) appendStringInfoString(&buf, s);
    }
    return buf.data;
}

namespace {

// Whether values of `type` (or of a type inside it) format by the locale
// (money: lc_monetary) or by the catalog and search_path (the reg* types).
bool session_formatted(Oid type) {
    check_stack_depth();
    type = getBaseType(type);
    switch (type) {
        case CASHOID:
        case REGPROCOID:
        case REGPROCEDUREOID:
        case REGOPEROID:
        case REGOPERATOROID:
        case REGCLASSOID:
        case REGTYPEOID:
        case REGCONFIGOID:
        case REGDICTIONARYOID:
        case REGNAMESPACEOID:
        case REGROLEOID:
        case REGCOLLATIONOID: return true;
        default: break;
    }
    Oid element = get_element_type(type);
    if (OidIsValid(element)) return session_formatted(element);
    if (type_is_range(type)) return session_formatted(get_range_subtype(type));
    if (type_is_multirange(type)) return session_formatted(get_range_subtype(get_multirange_range(type)));
    if (type_is_rowtype(type) && type != RECORDOID) {
        TupleDesc desc = lookup_rowtype_tupdesc(type, -1);
        bool found = false;
        for (int i = 0; i < desc->natts && !found; i++) {
            Form_pg_attribute att = TupleDescAttr(desc, i);
            if (!att->attisdropped) found = session_formatted(att->atttypid);
        }
        ReleaseTupleDesc(desc);
        return found;
    }
    return false;
}

struct TextCall {
    IdentityValue value;
    char *text;
};

void text_of(void *arg) {
    TextCall *call = (TextCall *)arg;
    call->text = changefeed_identity_text(&call->value);
}

struct OutputCache {
    Oid type;
    FmgrInfo out;
};

}  // namespace

extern "C" {

// canonical_text(anyelement) RETURNS text: the value's text as a document id
// or partition key holds it (STRICT).
Datum changefeed_canonical_text(PG_FUNCTION_ARGS) {
    Oid type = get_fn_expr_argtype(fcinfo->flinfo, 0);
    if (!OidIsValid(type))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("changefeed.canonical_text() cannot tell the type of its argument"),
                        errhint("Cast the argument to its type.")));
    OutputCache *cache = (OutputCache *)fcinfo->flinfo->fn_extra;
    if (cache == NULL || cache->type != type) {
        cache = (OutputCache *)MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(OutputCache));
        Oid func;
        bool varlena;
        getTypeOutputInfo(type, &func, &varlena);
        fmgr_info_cxt(func, &cache->out, fcinfo->flinfo->fn_mcxt);
        cache->type = type;
        fcinfo->flinfo->fn_extra = cache;
    }
    TextCall call = {{PG_GETARG_DATUM(0), false, &cache->out}, NULL};
    changefeed_canonical(text_of, &call);
    PG_RETURN_TEXT_P(cstring_to_text(call.text));
}

// session_formatted(regtype) RETURNS bool: whether the type's values have no
// canonical text (money, reg*, or a type holding one).
Datum changefeed_session_formatted(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(session_formatted(PG_GETARG_OID(0)));
}

}  // extern "C"
