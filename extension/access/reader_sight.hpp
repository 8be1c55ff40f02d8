// What the reader of a feed may see of its table's rows (reader_sight.cpp):
// the table's row-level security policies as they apply to the reader, and
// the columns it may SELECT, applied to every logged image a read delivers.
#pragma once
#include "pg.hpp"

struct ReaderSight;

// The sight of the calling role (changefeed.caller()) on collection
// `collection`'s table, as a SELECT of theirs would be checked now: NULL when
// it sees every row and column.  Policies are read at each call, so a policy
// changed between two reads applies to the second.  42501 when the reader
// may SELECT none of the table's columns, or policies apply and
// row_security is off.
ReaderSight *reader_sight_for(int32 collection);

// Images are judged by column identity: each logged image was written under
// a schema version of the table (capture/schema.sql), whose columns map its keys
// to attribute numbers; a key is the column of that number today, whatever
// its name is now.  `version` is the log row's (0: written before versions
// were kept, read as the first), or kShapeNow for a row read from the table.
constexpr int32 kShapeNow = -1;

// What the reader sees of a change read as `seen` (c, r, d, t or s) with
// these images: `seen` itself, or a replace that moved the row out of its
// sight as 'd' (its image before only), into its sight as 'c' (its image
// after only), or 0 for a change it may not see.  Clears and schema changes
// pass.  Without the image that decides (a delete, or a replace out of
// sight, of a collection that keeps no previous images) the change is not
// seen.  The policies see the image as a row of today's table: each key
// under the name its column has now, keys of dropped columns left out.
char reader_sight_op(ReaderSight *sight, char seen, int32 version, Datum current, bool current_null, Datum previous,
                     bool previous_null);

// The image with only the columns the reader may SELECT now (an allow-list:
// a key whose column is gone or unknown is left out), under the names they
// had when it was logged; the same datum when it may SELECT the table.
Datum reader_visible_image(ReaderSight *sight, int32 version, Datum image);
// The version of a row logged without one, by its seq (0: none known).
int32 reader_version_at(ReaderSight *sight, int64 seq);

// A schema change (operation 's') as the reader may see it: its lists of
// columns without those it may not SELECT now (dropped ones included).
Datum reader_visible_schema(ReaderSight *sight, Datum change);

// Whether the reader may see the tenant column (NULL or no tenant column: yes).
bool reader_sees_tenant(const ReaderSight *sight);

// 42501 when jsonpath `filter` names a column the reader may not SELECT
// (filters are evaluated on visible images anyway).
void reader_sight_check_filter(const ReaderSight *sight, Datum filter);

// Frees what the sight prepared (also freed with the read's memory); with
// `unlock`, gives back its lock on the table (a read that waits holds none).
void reader_sight_close(ReaderSight *sight, bool unlock);
