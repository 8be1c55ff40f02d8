// Running a table's own SQL as its owner (extension/access/as_owner.cpp).
// Include after pg.hpp.
#pragma once

// What as_owner_begin changed, for as_owner_end to put back.
struct AsOwner {
    Oid saved_userid;
    int saved_sec_context;
    int guc_nestlevel;
};

// begin: the current user becomes `owner` in a security-restricted operation
// with search_path pg_catalog, pg_temp (cf. vacuum.c, matview.c), so the
// owner's functions, casts and operators never run with our rights; end puts
// user and settings back.  On an error the (sub)transaction's abort restores
// both, so end is only for the way out without one.
void as_owner_begin(Oid owner, AsOwner *saved);
void as_owner_end(const AsOwner *saved);

// The owner of the extension's catalog (changefeed.collection): whom code
// that runs as its caller becomes for the catalog work alone, after it has
// resolved every name of the caller's command as the caller.
Oid changefeed_catalog_owner(void);
