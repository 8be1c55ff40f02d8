// Whether a DDL keeps the stored values of an enabled table
// (extension/guard/rewrites.cpp).  Include after pg.hpp.
#pragma once

extern "C" {
#include "nodes/parsenodes.h"
}

// Why ALTER COLUMN ... TYPE (subcommand `cmd` of an ALTER TABLE of `relid`)
// would change or reinterpret stored values, or NULL when it keeps every
// value and its text (or when PostgreSQL itself will refuse the command).
const char *changefeed_type_change_problem(Oid relid, AlterTableCmd *cmd);

// The ALTER TABLE whose type changes were all judged to keep values: its
// table rewrite (a domain's check) may pass.  Forgotten at the next ALTER
// TABLE and at transaction end.
void changefeed_approve_rewrite(const Node *stmt);
bool changefeed_rewrite_approved(const Node *stmt);
void changefeed_forget_rewrite(void);
