// Partition retention (extension/guard/partition_drops.cpp).  Include after pg.hpp.
#pragma once

// A DETACH PARTITION from `parent`, under an enabled table, at
// ddl_command_start: false when the collection refuses it (partition_drops =
// 'refuse'); otherwise the partition's rows are logged as expired ('expire'),
// its TRUNCATE guards go, and true.  The partition's name resolves as
// `caller`, the role whose command it is and in whose search_path.
bool changefeed_partition_detach(AlterTableStmt *stmt, Oid parent, Oid caller);
