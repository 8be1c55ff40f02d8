// The image from before a replace, stored as what differs from the image
// after it.  An update of one field would otherwise write the row twice into
// the log (and its WAL): its image after, and its image before.  Every image
// whose patch is smaller is stored so, whatever its size.  The log stores instead {"": P}, where the patch P
// turns the image after into the image before; every read rebuilds the
// whole image from the change's own image after, so readers see what they
// always saw.  A row image never has the key "" (a column name cannot be
// empty), so {"": ...} is never a whole image.
//
// A patch of an object maps each key whose value differs to
//   [v]    the value before was v (whole);
//   []     the key was not there before;
//   {...}  both values are objects: a patch of the value after (nested).
// Keys it does not name have the same value before and after.  Values are
// compared by their bytes (jsonb is canonical): equal bytes are an equal
// value; a value equal in another form (1.0 and 1.00) counts as different
// and is stored whole, which is never wrong.
#include "pg.hpp"
#include "capture/previous_patch.hpp"

extern "C" {
#include "utils/jsonb.h"
}

namespace {

// A patch is at least about 40 bytes ({"": {"k": [v]}}): images smaller than
// this are stored whole without trying.
constexpr Size kPatchFromBytes = 64;
// A patch is kept when it saves at least this much; below it, sparing every
// read the rebuild is worth more than the bytes.
constexpr Size kPatchSavesBytes = 16;
// Patches nest into objects this deep (columns, a document's fields, theirs).
constexpr int kMaxDepth = 3;

bool same_value(const JsonbValue &a, const JsonbValue &b) {
    if (a.type != b.type) return false;
    switch (a.type) {
        case jbvNull: return true;
        case jbvBool: return a.val.boolean == b.val.boolean;
        case jbvString:
            return a.val.string.len == b.val.string.len &&
                   memcmp(a.val.string.val, b.val.string.val, a.val.string.len) == 0;
        case jbvNumeric: {
            Size len = VARSIZE_ANY(a.val.numeric);
            return len == VARSIZE_ANY(b.val.numeric) && memcmp(a.val.numeric, b.val.numeric, len) == 0;
        }
        case jbvBinary:
            return a.val.binary.len == b.val.binary.len &&
                   memcmp(a.val.binary.data, b.val.binary.data, a.val.binary.len) == 0;
        default: return false;
    }
}

bool is_object(const JsonbValue &v) {
    return v.type == jbvBinary && JsonContainerIsObject(v.val.binary.data);
}

void push_key(JsonbParseState **state, JsonbValue key) {
    pushJsonbValue(state, WJB_KEY, &key);
}

// [v], or [] when v is NULL.
void push_wrapped(JsonbParseState **state, JsonbValue *v) {
    pushJsonbValue(state, WJB_BEGIN_ARRAY, NULL);
    if (v != NULL) pushJsonbValue(state, WJB_ELEM, v);
    pushJsonbValue(state, WJB_END_ARRAY, NULL);
}

// Pushes the patch that turns object `after` into object `before`.
void push_patch(JsonbParseState **state, JsonbContainer *after, JsonbContainer *before, int depth) {
    pushJsonbValue(state, WJB_BEGIN_OBJECT, NULL);
    JsonbIterator *it = JsonbIteratorInit(before);
    JsonbValue key, value, other;
    JsonbIteratorToken tok;
    while ((tok = JsonbIteratorNext(&it, &key, true)) != WJB_DONE) {
        if (tok != WJB_KEY) continue;
        (void)JsonbIteratorNext(&it, &value, true);
        JsonbValue *now = getKeyJsonValueFromContainer(after, key.val.string.val, key.val.string.len, &other);
        if (now != NULL && same_value(*now, value)) continue;
        push_key(state, key);
        if (now != NULL && depth < kMaxDepth && is_object(*now) && is_object(value))
            push_patch(state, now->val.binary.data, value.val.binary.data, depth + 1);
        else
            push_wrapped(state, &value);
    }
    it = JsonbIteratorInit(after);
    while ((tok = JsonbIteratorNext(&it, &key, true)) != WJB_DONE) {
        if (tok != WJB_KEY) continue;
        (void)JsonbIteratorNext(&it, &value, true);
        if (getKeyJsonValueFromContainer(before, key.val.string.val, key.val.string.len, &other) != NULL) continue;
        push_key(state, key);
        push_wrapped(state, NULL);
    }
    pushJsonbValue(state, WJB_END_OBJECT, NULL);
}

[[noreturn]] void corrupt(const char *why) {
    ereport(ERROR,
            (errcode(ERRCODE_DATA_CORRUPTED), errmsg("the image from before a change cannot be rebuilt: %s", why),
             errhint("The change log holds a damaged patch of a previous image.")));
}

// The value an entry of a patch stores whole ([v]), or NULL for [].
JsonbValue *wrapped(const JsonbValue &entry) {
    if (entry.type != jbvBinary || !JsonContainerIsArray(entry.val.binary.data))
        corrupt("an entry is not [] or [value]");
    uint32 n = JsonContainerSize(entry.val.binary.data);
    if (n > 1) corrupt("an entry holds more than one value");
    return n == 0 ? NULL : getIthJsonbValueFromContainer(entry.val.binary.data, 0);
}

// Pushes object `after` with `patch` applied: the object before.  Returns
// what the object's end returns (the whole value, for the outermost one).
JsonbValue *push_applied(JsonbParseState **state, JsonbContainer *after, JsonbContainer *patch) {
    pushJsonbValue(state, WJB_BEGIN_OBJECT, NULL);
    JsonbIterator *it = JsonbIteratorInit(after);
    JsonbValue key, value, entry;
    JsonbIteratorToken tok;
    while ((tok = JsonbIteratorNext(&it, &key, true)) != WJB_DONE) {
        if (tok != WJB_KEY) continue;
        (void)JsonbIteratorNext(&it, &value, true);
        if (getKeyJsonValueFromContainer(patch, key.val.string.val, key.val.string.len, &entry) == NULL) {
            push_key(state, key);
            pushJsonbValue(state, WJB_VALUE, &value);
        } else if (is_object(entry)) {
            if (!is_object(value)) corrupt("a nested patch of a value that is not an object");
            push_key(state, key);
            push_applied(state, value.val.binary.data, entry.val.binary.data);
        } else if (JsonbValue *before = wrapped(entry)) {
            push_key(state, key);
            pushJsonbValue(state, WJB_VALUE, before);
        }
    }
    // Keys that were there before and are not after.
    it = JsonbIteratorInit(patch);
    while ((tok = JsonbIteratorNext(&it, &key, true)) != WJB_DONE) {
        if (tok != WJB_KEY) continue;
        (void)JsonbIteratorNext(&it, &entry, true);
        if (getKeyJsonValueFromContainer(after, key.val.string.val, key.val.string.len, &value) != NULL) continue;
        JsonbValue *before = wrapped(entry);
        if (before == NULL) corrupt("a key absent both before and after");
        push_key(state, key);
        pushJsonbValue(state, WJB_VALUE, before);
    }
    return pushJsonbValue(state, WJB_END_OBJECT, NULL);
}

// The patch of a stored previous image, or NULL when it is a whole image.
JsonbContainer *patch_of(Jsonb *stored, JsonbValue *holder) {
    if (!JB_ROOT_IS_OBJECT(stored) || JB_ROOT_COUNT(stored) != 1) return NULL;
    if (getKeyJsonValueFromContainer(&stored->root, "", 0, holder) == NULL) return NULL;
    if (!is_object(*holder)) corrupt("the patch is not an object");
    return holder->val.binary.data;
}

}  // namespace

Datum changefeed_previous_patch(Datum current, Datum previous) {
    Jsonb *before = DatumGetJsonbP(previous);
    if (VARSIZE(before) < kPatchFromBytes) return previous;
    Jsonb *after = DatumGetJsonbP(current);
    if (!JB_ROOT_IS_OBJECT(after) || !JB_ROOT_IS_OBJECT(before)) return previous;
    JsonbParseState *state = NULL;
    pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
    JsonbValue marker;
    marker.type = jbvString;
    marker.val.string.val = (char *)"";
    marker.val.string.len = 0;
    push_key(&state, marker);
    push_patch(&state, &after->root, &before->root, 1);
    Jsonb *patch = JsonbValueToJsonb(pushJsonbValue(&state, WJB_END_OBJECT, NULL));
    if (VARSIZE(patch) + kPatchSavesBytes > VARSIZE(before)) {
        pfree(patch);
        return previous;
    }
    return JsonbPGetDatum(patch);
}

Datum changefeed_previous_whole(Datum current, Datum stored) {
    Jsonb *previous = DatumGetJsonbP(stored);
    JsonbValue holder;
    JsonbContainer *patch = patch_of(previous, &holder);
    if (patch == NULL) return JsonbPGetDatum(previous);
    Jsonb *after = DatumGetJsonbP(current);
    if (!JB_ROOT_IS_OBJECT(after)) corrupt("the image after is not an object");
    JsonbParseState *state = NULL;
    return JsonbPGetDatum(JsonbValueToJsonb(push_applied(&state, &after->root, patch)));
}

extern "C" {

PG_FUNCTION_INFO_V1(changefeed_whole_previous);

// changefeed.whole_previous(current, previous): a change's image from before
// as read() returns it, from the two images changefeed.log holds.
Datum changefeed_whole_previous(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(1)) PG_RETURN_NULL();
    if (PG_ARGISNULL(0)) PG_RETURN_DATUM(PG_GETARG_DATUM(1));
    PG_RETURN_DATUM(changefeed_previous_whole(PG_GETARG_DATUM(0), PG_GETARG_DATUM(1)));
}

}  // extern "C"
