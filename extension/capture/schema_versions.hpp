// Schema versions on the capture side (schema_versions.cpp; the catalog and
// the SQL half are in extension/capture/schema.sql).
#pragma once
#include "pg.hpp"

// The schema version collection `collection_id` captures under now, as
// committed (or made by this transaction): cached per backend, dropped at
// every relation cache invalidation, so a DDL's new version holds for every
// row written after it.  0 when the collection is gone.
int32 changefeed_schema_version(int32 collection_id);

// The table of collection `collection_id` (read with its version, kept for
// the backend's life), or InvalidOid when there is no such collection.
// *known is false when the catalog was locked and could not be read: the
// answer is then InvalidOid without meaning.
Oid changefeed_collection_table(int32 collection_id, bool *known);
