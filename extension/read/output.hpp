// The rows a read returns (output.cpp).  In: a row of the page (its log
// tuple and partition, the operation the reader sees of it, its position or
// none, the document read from the table in mode 'latest').  Out: a row of
// read()'s result set (read_ranges()'s resume_ranges null), with the images
// and tenant the reader may see, its operation's name and its event id; a
// marker row of read_ranges(); positions as text.
#pragma once
#include "pg.hpp"
#include "access/reader_sight.hpp"
#include "position/pg_snapshot.hpp"
#include "read/log_partitions.hpp"
#include "read/window_filter.hpp"

namespace changefeed::read {

// pg_snapshot_out(): a snapshot as a position holds it.
char *snapshot_text(const PgSnapshot *s);
// The position (lo, hi, seq) as text (hi NULL: the position at lo), made in
// `buf`.
text *encode_position(const char *lo, const char *hi, int64 seq, char *buf, size_t buflen);

// Forms read()'s rows into the result set.
struct Emitter {
    ReturnSetInfo *rsinfo;
    const TextSet *tenants;  // the read's tenants (n < 0: not scoped), for seen_op()
    text *last_pos;          // the position after the last row emitted
    char prefix[32];         // "<collection id>."
    int prefix_len;
    Datum *all;  // a deformed log row, sized for the widest partition
    bool *all_null;
    bool all_versions;   // mode 'all': a change needs its logged images
    ReaderSight *sight;  // what the reader may see (null: everything)
    // Rows carry their positions every this many changes of their range
    // (read_ranges(positions_every)), counted in per_range by range id.
    int32 every;
    int32 *per_range;
};

// Ready to form rows of collection `collection`, read from `parts`, into
// rsinfo's result set; as set here, every row carries its position and all
// of it is seen (the caller sets all_versions, sight and every).
void emitter_init(Emitter *out, int32 collection, Partition *parts, int nparts, ReturnSetInfo *rsinfo,
                  const TextSet *tenants);
// The row of log tuple `tuple` of partition `p`: `pos` its position (NULL:
// none), `current` the document read from the table (0: the logged one),
// `row_seen` what the reader sees of it (0: what its tenants see).
void emit(Emitter *out, Partition *p, HeapTuple tuple, int64 seq, text *pos, Datum current, char row_seen);

// A marker row of read_ranges(): `ranges` resume at `pos`.
void emit_marker(Emitter *out, text *pos, const int32 *ranges, int nranges);

}  // namespace changefeed::read
