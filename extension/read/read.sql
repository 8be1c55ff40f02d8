-- changefeed: positions and reads.
--
-- A position is opaque, versioned text.  It holds a lower snapshot `lo`
-- (everything visible in it was delivered) and, while a window is being paged,
-- the window's upper snapshot `hi` and the last seq delivered inside it.
-- Encoding and validation live in C++ (extension/position*.cpp); positions
-- carry a MAC under the database's key (changefeed.position_key), so only
-- these functions can mint one, and the timeline and WAL position they were
-- encoded at, which decode checks against the server's history.
-- STABLE: within a statement the same arguments give positions that read
-- alike (the key never changes once created; two encodes differ at most in
-- the WAL position they carry, each valid; decode's checks against the next
-- transaction id and the replayed WAL can only turn an error into a result as
-- time goes on, and an error ends the statement).  PARALLEL SAFE: workers see
-- the same cluster, database, key, WAL and shared transaction counter.
CREATE OR REPLACE FUNCTION changefeed.position_encode(lo pg_snapshot, hi pg_snapshot, last_seq bigint)
RETURNS text AS 'MODULE_PATHNAME', 'changefeed_position_encode' LANGUAGE C STABLE PARALLEL SAFE;

CREATE OR REPLACE FUNCTION changefeed.position_decode(pos text, OUT lo pg_snapshot, OUT hi pg_snapshot, OUT last_seq bigint)
RETURNS record AS 'MODULE_PATHNAME', 'changefeed_position_decode' LANGUAGE C STABLE PARALLEL SAFE;

-- This statement's snapshot, with our own transaction counted as in
-- progress.  PostgreSQL leaves the current transaction out of its snapshot's
-- in-progress list, so a position cut from pg_current_snapshot() inside a
-- transaction that has written (lease_init() or current_position() in the
-- same transaction as the first inserts) would count that transaction's own
-- changes as delivered before they commit: they would never be read.  Our id
-- is in progress for every other session, and so it is here.
CREATE OR REPLACE FUNCTION changefeed.snapshot_now() RETURNS pg_snapshot
AS 'MODULE_PATHNAME', 'changefeed_snapshot_now' LANGUAGE C STABLE PARALLEL RESTRICTED;

-- The position of "now": a read from it returns what commits after this
-- statement's snapshot, our own transaction's changes included.  Inside a
-- REPEATABLE READ transaction it is the transaction's snapshot, the same one
-- read() uses there.
CREATE OR REPLACE FUNCTION changefeed.current_position() RETURNS text
LANGUAGE sql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog, pg_temp AS $$
    SELECT changefeed.position_encode(changefeed.snapshot_now(), NULL, 0)
$$;

-- The position from which a read delivers every change of collection `c`
-- written at or after `at` (written_at: the writing transaction's start), and
-- perhaps some written shortly before.  With S the current snapshot and m the
-- smallest transaction id among those changes, the position's snapshot `lo`
-- is S cut at m: everything before m that S saw committed counts as
-- delivered, transactions S saw in progress do not.  So a transaction still
-- open now, started after `at`, is delivered when it commits.  S is taken
-- before the log is searched: a transaction committing in between either has
-- its rows found (then m covers it) or was in progress in S.
-- CF003 for a NULL or infinite time, CF006 when retention dropped changes
-- written after `at`, CF019 when capture was off after `at`.
CREATE OR REPLACE FUNCTION changefeed.position_since(c changefeed.collection, at timestamptz) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    h changefeed.horizon;
    s pg_snapshot;
    m xid8;
    t xid8;
    lo_xmax xid8;
    xips xid8[];
BEGIN
    IF at IS NULL OR NOT isfinite(at) THEN
        RAISE EXCEPTION 'start time must be a finite time, not %', coalesce(at::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    SELECT * INTO h FROM changefeed.horizon WHERE collection_id = c.id;
    IF FOUND AND at < h.dropped_before AND h.cause = 'disabled' THEN
        RAISE EXCEPTION 'history lost for %: capture was disabled after the start time', c.relid::regclass
            USING ERRCODE = 'CF019',
                  DETAIL = format('The start time is %s; capture of %s was off from %s until %s.',
                                  at, c.relid::regclass, h.disabled_from, h.dropped_before),
                  HINT = 'Start from a later time, or rebuild the consumer from the table '
                         '(see docs/runbooks/history-lost.md).';
    ELSIF FOUND AND at < h.dropped_before THEN
        RAISE EXCEPTION 'history lost for %: retention dropped changes written after the start time',
                        c.relid::regclass
            USING ERRCODE = 'CF006',
                  DETAIL = format('The start time is %s; changes written before %s were dropped at %s; the retention of %s is %s.',
                                  at, h.dropped_before, h.dropped_at, c.relid::regclass, c.retention),
                  HINT = 'Start from a later time, or rebuild the consumer from the table '
                         '(see docs/runbooks/history-lost.md).';
    END IF;
    s := changefeed.snapshot_now();   -- our own changes are not delivered yet
    -- One index descent per range, over the partitions since `at` only.
    FOR r IN 0 .. c.ranges - 1 LOOP
        SELECT l.txid INTO t FROM changefeed.log l
         WHERE l.collection_id = c.id AND l.range_id = r AND l.written_at >= at
         ORDER BY l.txid LIMIT 1;
        IF FOUND AND (m IS NULL OR t < m) THEN m := t; END IF;
    END LOOP;
    IF m IS NULL THEN
        RETURN changefeed.position_encode(s, NULL, 0);
    END IF;
    lo_xmax := least(pg_snapshot_xmax(s), m);
    xips := ARRAY(SELECT x FROM pg_snapshot_xip(s) x WHERE x < lo_xmax ORDER BY x);
    RETURN changefeed.position_encode(
        format('%s:%s:%s', coalesce(xips[1], lo_xmax), lo_xmax, array_to_string(xips, ','))::pg_snapshot,
        NULL, 0);
END
$$;

-- The position from which a read of `tbl` delivers every change written at or
-- after `at` (see position_since).  Needs the right to read `tbl`'s feed.
CREATE OR REPLACE FUNCTION changefeed.position_at(tbl regclass, at timestamptz) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.require_read(tbl, changefeed.caller(), c.tenant_column, NULL);
    RETURN changefeed.position_since(c, at);
END
$$;

-- A collection that logs keys alone (images => 'keys') has no versions to
-- give but the rows as they are now: the all-versions feed is refused
-- (CF021), before anything is read.  (A change logged while it was 'keys',
-- met by an all-versions read after alter(images => 'full'), is refused by
-- read/window_filter.cpp.)
CREATE OR REPLACE FUNCTION changefeed.check_images_read(c changefeed.collection, mode text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF c.images = 'keys' AND mode IN ('all', 'all_with_schema') THEN
        RAISE EXCEPTION 'the all-versions feed of % is not available: it logs keys alone (images => ''keys'')',
                        c.relid::regclass
            USING ERRCODE = 'CF021',
                  DETAIL = 'Its changes carry no images: the latest-version feed reads the rows as they are now, '
                           'and deletes are not delivered.',
                  HINT = 'Read it with mode => ''latest'', or log images of the changes to come with '
                         'changefeed.alter(tbl, images => ''full'').';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION changefeed.operation_name(op "char") RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE op WHEN 'c' THEN 'create' WHEN 'r' THEN 'replace' WHEN 'm' THEN 'replace'
                   WHEN 'd' THEN 'delete' WHEN 't' THEN 'clear' WHEN 's' THEN 'schema' END
$$;

-- Reads the changes of `tbl` after `since`.
--   max_changes  at most this many rows (1 .. 100000)
--   ranges       only these range ids (null = all)
--   mode         'all': every version, deletes and clears included;
--                'all_with_schema': the same and the table's schema changes
--                (operation 'schema', capture/schema.sql), in order with the data;
--                'latest': per window, the latest version of each changed
--                document; documents whose latest change is a delete or a
--                clear do not appear.
--   filter       a jsonpath predicate over the document, with its variables in
--                filter_vars (values are never spliced into the path), e.g.
--                filter => '$.status == $s', filter_vars => '{"s": "open"}'.
--                Creates and replaces are tested on the document after the
--                write, deletes on the one before it when the collection
--                keeps previous images (passed through otherwise), clears
--                always pass; in mode 'latest' the latest version is tested.
--                A filter whose evaluation fails or gives no boolean counts
--                as no match (jsonb_path_match(..., silent => true)); a
--                variable missing from filter_vars (42704) or filter_vars not
--                an object (22023) ends the read.
--   filter_moves with a filter, in the modes 'all': a replace with its image
--                before is tested on both images, as a view defined by the
--                filter sees it: one that enters the view is a create (the
--                document after), one that leaves it a delete (the document
--                before), one that stays a replace (true, the default); false:
--                a replace is tested on the document after alone.
--   doc_ids      only changes of these documents (clears pass).
--   tenant       only changes of this tenant (collections with a tenant column;
--                clears pass).  A role bound to a tenant (bind_tenant) reads
--                only its tenant's changes, whatever it asks.  A row moved
--                to another tenant is a delete (without its image after) for
--                the old tenant and a create (without its image before) for
--                the new one.
-- The caller needs SELECT on the table (42501 otherwise).
-- Rows come window by window (a window = what committed between two
-- snapshots), in seq order inside a window.  Each row carries the position
-- after it; the changes the filters skip before it are behind it.  When a
-- window is exhausted the read rolls over into the next one.  A large
-- backlog is read in windows bounded by the notifier's ticks.
-- After a read that returned nothing, the position to keep is the read's own
-- snapshot: call read() and current_position() in one REPEATABLE READ
-- transaction.
-- event_id is "<collection id>.<txid>.<seq>": the same on every read of the
-- change by anyone, what a consumer deduplicates on (processors/dedup.sql); the two
-- sides of a tenant move, as tenant-scoped reads see it, add ".create" and
-- ".delete".
-- read() checks the call; the rows come from extension/read/read_window.cpp
-- (read_windows()), which holds a page in a result set: work_mem is raised
-- for read() and read_ranges(), as with the default 4 MB a page of 10,000
-- changes went to a temporary file.

-- A change's image from before as read() returns it, from the two images
-- changefeed.log holds: a replace of a large row stores a patch of its image
-- after ({"": ...}, extension/capture/previous_patch.cpp), rebuilt whole by every
-- read.  For those who query the log itself.
CREATE OR REPLACE FUNCTION changefeed.whole_previous("current" jsonb, previous jsonb) RETURNS jsonb
AS 'MODULE_PATHNAME', 'changefeed_whole_previous' LANGUAGE C IMMUTABLE PARALLEL SAFE;

-- read()'s rows, in C (extension/read/read_window.cpp), from the position (lo,
-- hi, last_seq) after the call was checked: the windows and their pages, in
-- mode 'all' or, with `latest`, mode 'latest', with read()'s filters.
CREATE OR REPLACE FUNCTION changefeed.read_windows(collection_id int, ranges int[], lo pg_snapshot, hi pg_snapshot,
                                        after bigint, max_changes int, doc_ids text[], tenants text[],
                                        latest bool, filter jsonpath DEFAULT NULL, filter_vars jsonb DEFAULT NULL,
                                        as_caller bool DEFAULT true, with_schema bool DEFAULT false,
                                        filter_moves bool DEFAULT false)
RETURNS TABLE (LIKE change)   -- a change row (surface.manifest)
AS 'MODULE_PATHNAME', 'changefeed_read_windows' LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION changefeed.read(
    tbl regclass,
    since text,
    max_changes int DEFAULT 1000,
    ranges int[] DEFAULT NULL,
    mode text DEFAULT 'all',
    filter jsonpath DEFAULT NULL,
    filter_vars jsonb DEFAULT NULL,
    doc_ids text[] DEFAULT NULL,
    only_tenant text DEFAULT NULL,   -- `tenant` in the entry point (surface.manifest)
    filter_moves bool DEFAULT true)
RETURNS TABLE (LIKE change)   -- a change row (surface.manifest)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET work_mem = '64MB' AS $$
#variable_conflict use_column
DECLARE
    c changefeed.collection;
    p record;
    tenants text[];
BEGIN
    PERFORM changefeed.check_read_args(mode, max_changes);
    c := changefeed.collection_of(tbl);
    tenants := changefeed.require_read(tbl, changefeed.caller(), c.tenant_column, only_tenant);
    PERFORM changefeed.check_images_read(c, mode);
    IF since IS NULL THEN
        RAISE EXCEPTION 'position must not be null'
            USING ERRCODE = 'CF004',
                  HINT = 'Start from changefeed.current_position(), or from a position a previous read returned.';
    END IF;
    p := changefeed.position_decode(since);
    PERFORM changefeed.check_history(c, p.lo);
    IF changefeed.captured_in_this_transaction() THEN
        RAISE EXCEPTION 'cannot read the change feed in a transaction that captured changes itself'
            USING ERRCODE = 'CF009',
                  DETAIL = 'Its own uncommitted changes would be delivered before they commit.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(ranges) r WHERE r IS NULL OR r < 0 OR r >= c.ranges) THEN
        RAISE EXCEPTION 'range ids must be between 0 and %', c.ranges - 1
            USING ERRCODE = 'CF020';
    END IF;
    RETURN QUERY SELECT * FROM changefeed.read_windows(
        c.id, coalesce(ranges, ARRAY(SELECT generate_series(0, c.ranges - 1))), p.lo, p.hi, p.last_seq,
        max_changes, doc_ids, tenants, mode = 'latest', filter, filter_vars,
        with_schema => mode = 'all_with_schema', filter_moves => coalesce(filter_moves, true));
END
$$;

-- Reads many ranges of `tbl`, each from its own position, in one call: the
-- wake-up of a processor instance over all the ranges it owns.
--   ranges, positions  range ids and the position each resumes from (same
--                      length, or one position for all the ranges; no
--                      nulls, no range twice)
--   max_changes        at most this many change rows in all (1 .. 100000)
--   mode, tenant       as in read()
-- Ranges at one position are read together by one read() (one window scan,
-- whatever their number); the groups are read oldest position first, each
-- with what is left of max_changes, so a group behind is never starved and
-- the groups come together once caught up.
-- Rows: the change rows of each range, in seq order (the order read() gives),
-- and marker rows (seq null) whose `resume_ranges` resume at `position` once
-- their change rows are handled.  A range in no marker row was not read (the
-- budget ran out first): it keeps its position.  Ranges read up to the
-- call's snapshot (all those that had nothing, and those whose group's rows
-- fit in the budget) resume at that snapshot, so an idle wake-up returns one
-- marker row and ranges at diverged positions come together once caught up.
-- Every read of the call and that snapshot are one, the statement's (in
-- REPEATABLE READ, the transaction's), so any isolation level will do and a
-- wake-up is one statement.
--   wait               a long poll (up to 60 s; 22023 otherwise): when the read
--                      finds no change, it sleeps until a commit of the
--                      collection wakes it, then reads again in a new snapshot,
--                      by the same rules, and returns what it found; after
--                      `wait` without a change, the markers of its last read.
--                      It holds no snapshot, xmin or lock on the log while it
--                      sleeps; a cancel stops it at once.  Needs the library
--                      preloaded, not a standby (CF022), and a READ COMMITTED
--                      transaction that has not written and has no cursor
--                      open (25000).  With `wait`, every read of the call
--                      takes its own snapshot, not the statement's.
--   positions_every    with N > 1, a change row carries its position only when
--                      it is the N-th, 2N-th, ... change of its range in this
--                      call (where a reader that hands a range's changes on in
--                      batches of N ends a batch); the others carry null.
--                      Markers always carry theirs.  1 (the default): every
--                      row carries its position.  At least 1 (22023).
-- The rows come from extension/read/read_window.cpp (changefeed_read_ranges):
-- read_ranges_plan() checks the call and plans the groups (a common call is
-- planned alike in C, extension/read/ranges_plan.cpp), C reads them straight
-- into the result.
CREATE OR REPLACE FUNCTION changefeed.read_ranges(
    tbl regclass,
    ranges int[],
    positions text[],
    max_changes int DEFAULT 1000,
    mode text DEFAULT 'all',
    only_tenant text DEFAULT NULL,   -- `tenant` in the entry point (surface.manifest)
    wait interval DEFAULT NULL,
    positions_every int DEFAULT 1)
RETURNS TABLE (
    LIKE change,           -- a change row (surface.manifest)
    resume_ranges int[])   -- marker rows only
LANGUAGE c VOLATILE SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'changefeed_read_ranges';

-- read_ranges()'s checks, and its groups in the order they are read (the
-- definition: read/ranges_plan.cpp plans a common call alike, faster, and
-- hands every other call here): one row
-- per position, with its ranges, its decoded position and the xmax its
-- window starts from; every group's history is checked.  Each row also
-- carries the collection and the caller's tenants (null: all).  Nothing here
-- depends on the snapshot the rows are read in.
CREATE OR REPLACE FUNCTION changefeed.read_ranges_plan(
    tbl regclass,
    ranges int[],
    positions text[],
    max_changes int,
    mode text,
    only_tenant text)
RETURNS TABLE (collection_id int, tenants text[],
               pos text, rs int[], lo pg_snapshot, hi pg_snapshot, last_seq bigint, upto xid8)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET jit = off AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection;
    g record;
    outside int;
    distinct_ranges int;
    shared bool;
BEGIN
    PERFORM changefeed.check_read_args(mode, max_changes);
    c := changefeed.collection_of(tbl);
    -- The rights are checked here too: an empty call reads nothing but still needs them.
    tenants := changefeed.require_read(tbl, changefeed.caller(), c.tenant_column, only_tenant);
    PERFORM changefeed.check_images_read(c, mode);
    -- One position for many ranges is that position for each of them: what
    -- an idle consumer sends, its ranges all resuming at one snapshot.
    shared := coalesce(array_length(positions, 1), 0) = 1 AND coalesce(array_length(ranges, 1), 0) > 1;
    IF ranges IS NULL OR positions IS NULL
       OR (coalesce(array_length(ranges, 1), 0) <> coalesce(array_length(positions, 1), 0) AND NOT shared) THEN
        RAISE EXCEPTION 'ranges and positions must be arrays of the same length, or one position for all the ranges'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- One statement for both checks: this runs on every wake-up.
    SELECT count(*) FILTER (WHERE x IS NULL OR x < 0 OR x >= c.ranges), count(DISTINCT x)
      INTO outside, distinct_ranges FROM unnest(ranges) x;
    IF outside > 0 THEN
        RAISE EXCEPTION 'range ids must be between 0 and %', c.ranges - 1
            USING ERRCODE = 'CF020';
    END IF;
    IF distinct_ranges <> coalesce(array_length(ranges, 1), 0) THEN
        RAISE EXCEPTION 'a range id must not be given twice' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(positions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'position must not be null' USING ERRCODE = 'CF004',
              HINT = 'Start from changefeed.current_position(), or from a position a previous read returned.';
    END IF;
    collection_id := c.id;
    -- Grouped by what the positions hold, not by their text: texts of one
    -- snapshot taken at different WAL positions read alike.  Each distinct
    -- text is decoded once, and the ranges are only gathered per group: the
    -- cost per range is that of an int, not of a position.
    FOR g IN
        WITH given AS (
            SELECT positions[1] AS pos, ranges AS rs WHERE shared
            UNION ALL
            SELECT p.pos, array_agg(p.r) FROM unnest(ranges, positions) AS p(r, pos) WHERE NOT shared GROUP BY p.pos
        ), decoded AS (
            SELECT t.pos, t.rs, d.lo, d.hi, d.last_seq, d.lo::text AS lo_text, d.hi::text AS hi_text
              FROM given t CROSS JOIN LATERAL changefeed.position_decode(t.pos) d
        ), q AS (
            SELECT min(e.pos) AS pos, (array_agg(e.lo))[1] AS lo, (array_agg(e.hi))[1] AS hi, e.last_seq,
                   e.lo_text, e.hi_text
              FROM decoded e GROUP BY e.lo_text, e.hi_text, e.last_seq
        )
        SELECT q.pos,
               ARRAY(SELECT x FROM decoded e CROSS JOIN LATERAL unnest(e.rs) x
                      WHERE e.lo_text = q.lo_text AND e.hi_text IS NOT DISTINCT FROM q.hi_text
                        AND e.last_seq IS NOT DISTINCT FROM q.last_seq
                      ORDER BY x) AS rs,
               q.lo, q.hi, q.last_seq, pg_snapshot_xmax(coalesce(q.hi, q.lo)) AS upto,
               CASE WHEN h.dropped_txid IS NULL THEN true
                    ELSE changefeed.snapshot_covers(q.lo, h.dropped_txid) END AS covered
          FROM q
          LEFT JOIN changefeed.horizon h ON h.collection_id = c.id
         ORDER BY pg_snapshot_xmax(q.lo), q.hi IS NOT NULL, pg_snapshot_xmax(q.hi), q.last_seq, q.pos
    LOOP
        IF NOT g.covered THEN
            PERFORM changefeed.check_history(c, g.lo);   -- raises CF006, saying why
        END IF;
        pos := g.pos; rs := g.rs; lo := g.lo; hi := g.hi; last_seq := g.last_seq; upto := g.upto;
        RETURN NEXT;
    END LOOP;
END
$$;
