// Whether a read may let go of its statement's snapshot while it waits
// (extension/wake/wait_alone.cpp).  Include after pg.hpp.
#pragma once

// True when the statement calling the set-returning function of `fcinfo` is
// the one the client sent (not a query inside a function) and reads nothing
// but that function's result: no other relation, subquery or function that
// could read with the statement's snapshot after the function returns.
bool changefeed_read_is_statement_alone(FunctionCallInfo fcinfo);
