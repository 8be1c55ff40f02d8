// The rows of a collection as they are now, for the latest-version feed of a
// collection that logs keys alone (images => 'keys'), and of changes logged
// while one did.  A read looks each document up by its key in the table's
// primary key index, in the read's snapshot, with the reader's rights.
#pragma once
#include "pg.hpp"

struct CurrentRows;

// Collection `collection`'s reader of current rows, not opened yet (one
// catalog lookup).
CurrentRows *current_rows_for(int32 collection);
// Whether the collection logs keys alone: every change's document is read
// from the table.
bool current_rows_keys_only(const CurrentRows *rows);
// The row of document `doc_id` (a logged doc_id) now: true with its jsonb in
// *document and its tenant's text in *tenant (0: null, or no tenant column);
// false when no such row is visible.  The first call opens the table and its
// index and checks the reader's rights.
bool current_row(CurrentRows *rows, text *doc_id, Datum *document, Datum *tenant);
// `unlock`: gives back the table's lock too (a long-poll read about to wait
// holds no lock a DDL of the table would queue behind).
void current_rows_close(CurrentRows *rows, bool unlock = false);
