// The PostgreSQL server API across the supported majors (15, 16, 17, 18):
// every place where it changed is bridged here, so the sources call one
// spelling.  Included by pg.hpp.
#pragma once

#if PG_VERSION_NUM < 150000
#error "changefeed needs PostgreSQL 15 or newer"
#endif

extern "C" {
#include "utils/acl.h"
}

#if PG_VERSION_NUM >= 160000
// 16 replaced the per-catalog ownership checks with object_ownercheck().
extern "C" {
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
}
static inline bool pg_database_ownercheck(Oid database, Oid role) {
    return object_ownercheck(DatabaseRelationId, database, role);
}
static inline bool pg_extension_ownercheck(Oid extension, Oid role) {
    return object_ownercheck(ExtensionRelationId, extension, role);
}
#endif

#if PG_VERSION_NUM >= 180000
// 18 added an instrumentation argument to index_beginscan(); the sources call
// the older form (the macro's own name is not expanded again).
extern "C" {
#include "access/genam.h"
}
#define index_beginscan(heap, index, snapshot, nkeys, norderbys) \
    index_beginscan(heap, index, snapshot, NULL, nkeys, norderbys)
#endif

// 18 added virtual generated columns: computed when read, so a row trigger
// sees them null.  Capture refuses writes to such a table (capture.cpp).
static inline bool changefeed_has_virtual_generated_columns(TupleDesc desc) {
#if PG_VERSION_NUM >= 180000
    return desc->constr != NULL && desc->constr->has_generated_virtual;
#else
    (void)desc;
    return false;
#endif
}

// 17 added ALTER TABLE ... ALTER COLUMN ... SET EXPRESSION, which rewrites a
// stored generated column without firing row triggers (guard.cpp refuses it
// on an enabled table).
extern "C" {
#include "nodes/parsenodes.h"
}
static inline bool changefeed_sets_expression(AlterTableType subtype) {
#if PG_VERSION_NUM >= 170000
    return subtype == AT_SetExpression;
#else
    (void)subtype;
    return false;
#endif
}

// 16 moved a relation's required permissions and checkAsUser from its range
// table entry into the query's RTEPermissionInfo list (which row-level
// security reads the user from): reader_sight.cpp's SELECT as `reader`.
#if PG_VERSION_NUM >= 160000
extern "C" {
#include "parser/parse_relation.h"
}
#endif
static inline void changefeed_select_as(Query *query, RangeTblEntry *rte, Oid reader) {
#if PG_VERSION_NUM >= 160000
    RTEPermissionInfo *perminfo = addRTEPermissionInfo(&query->rteperminfos, rte);
    perminfo->requiredPerms = ACL_SELECT;
    perminfo->checkAsUser = reader;
#else
    (void)query;
    rte->requiredPerms = ACL_SELECT;
    rte->checkAsUser = reader;
#endif
}
