// PostgreSQL headers for the extension's C++ sources, and the rule every file
// that includes them keeps.
//
// The boundary rule: PostgreSQL errors longjmp, so a file that includes this
// header (a PostgreSQL-facing file) holds only plain C data in its frames: no
// C++ object with a destructor (the longjmp would skip it), no throw, no try.
// C++ code that can throw (the position codec, position_codec.cpp) is pure,
// never includes this header, and is called through C wrappers that catch
// every exception and return a status (ChangefeedCodecStatus), which the
// caller turns into an ereport only after the C++ frames are gone.
// test/stages/codec_guard.sh checks both halves on every file of extension/.
//
// Each module's API is in its own header (notifier.hpp, ttl.hpp, ...), our
// SQLSTATEs in sqlstates.hpp; include them after this one.
#pragma once

// position_codec.cpp refuses to compile when this is defined.
#define CHANGEFEED_PG_HEADERS 1

extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
}

// Where the server API differs between PostgreSQL majors.
#include "pg_compat.hpp"
