// Canonical document identity (extension/capture/identity.cpp).  Include after pg.hpp.
//
// A document id, partition key and tenant are texts of table values.  A type's
// output function formats by the session's settings (TimeZone, DateStyle,
// IntervalStyle, extra_float_digits, bytea_output), so every place that makes
// or parses such a text from a row does it inside changefeed_canonical(),
// which fixes them: capture, partition expiry, the keys-only lookups, and SQL
// through changefeed.canonical_text() (backfill).
#pragma once

// Runs fn(arg) with the canonical settings: TimeZone UTC, DateStyle ISO (YMD),
// IntervalStyle postgres, extra_float_digits 1, bytea_output hex.  The
// session's are back when it returns or raises.  fn must hold no C++ object
// with a destructor (it may ereport).
void changefeed_canonical(void (*fn)(void *arg), void *arg);

// Whether the current code runs inside changefeed_canonical().
bool changefeed_canonical_active(void);

// One column of an identity: its value and output function.
struct IdentityValue {
    Datum value;
    bool isnull;
    FmgrInfo *out;
};

// Inside changefeed_canonical() only.  The document id: the key's text, or a
// JSON array of the texts (null for a null part) for a composite key; "" for
// a null single key.
char *changefeed_document_id(const IdentityValue *keys, int n);
// The partition key: the texts joined by '/', a null as the empty text.
char *changefeed_partition_key(const IdentityValue *parts, int n);
// A value's canonical text, or NULL for a null.
char *changefeed_identity_text(const IdentityValue *v);
