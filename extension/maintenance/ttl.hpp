// TTL sweeper (extension/maintenance/ttl.cpp).  Include after pg.hpp.
#pragma once

// Whether deletes of `collection_id` made now in this backend are TTL expiry
// (a sweep of that collection is running, or a superuser set
// changefeed.delete_reason = 'ttl').
bool changefeed_ttl_sweep_active(int32 collection_id);
