// Running a table's own SQL as its owner: the TTL sweep and the expiry of
// dropped partitions read and delete rows with the owner's rights, never ours.
#include "pg.hpp"
#include "access/as_owner.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/syscache.h"
}

void as_owner_begin(Oid owner, AsOwner *saved) {
    GetUserIdAndSecContext(&saved->saved_userid, &saved->saved_sec_context);
    SetUserIdAndSecContext(owner, saved->saved_sec_context | SECURITY_RESTRICTED_OPERATION);
    saved->guc_nestlevel = NewGUCNestLevel();
    (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                            false);
}

void as_owner_end(const AsOwner *saved) {
    AtEOXact_GUC(false, saved->guc_nestlevel);
    SetUserIdAndSecContext(saved->saved_userid, saved->saved_sec_context);
}

Oid changefeed_catalog_owner(void) {
    Oid relid = get_relname_relid("collection", get_namespace_oid("changefeed", false));
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "changefeed: the catalog table changefeed.collection is missing");
    Oid owner = ((Form_pg_class)GETSTRUCT(tuple))->relowner;
    ReleaseSysCache(tuple);
    return owner;
}
