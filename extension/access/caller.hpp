// The role that called the innermost entry point of the SQL surface
// (caller.cpp): whose rights a SECURITY DEFINER implementation checks.
#pragma once
#include "pg.hpp"

Oid changefeed_current_caller(void);
