// Running a table's own SQL as its owner: the TTL sweep and the expiry of
// dropped partitions read and delete rows with the owner's rights, never ours.
#include "pg.hpp"
#include "as_owner.hpp"

extern "C" {
#include "miscadmin.h"
#include "utils/guc.h"
}

void as_owner_begin(Oid owner, AsOwner *saved) {
    GetUserIdAndSecContext(&saved->saved_userid, &saved->saved_sec_context);
    SetUserIdAndSecContext(owner, saved->saved_sec_context | SECURITY_RESTRICTED_OPERATION);
    saved->guc_nestlevel = NewGUCNestLevel();
    (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true,
                            0, false);
}

void as_owner_end(const AsOwner *saved) {
    AtEOXact_GUC(false, saved->guc_nestlevel);
    SetUserIdAndSecContext(saved->saved_userid, saved->saved_sec_context);
}
