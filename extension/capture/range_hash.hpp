// Which range a partition key falls in (extension/capture/range_hash.cpp).  Include
// after pg.hpp.
#pragma once

// FNV-1a (32 bit) of the partition key's bytes; range = hash % ranges.  The
// log stores each row's range, so the hash never changes (sql/capture.sql
// pins some values).
uint32 changefeed_range_hash(const char *bytes, size_t len);
