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

CREATE OR REPLACE FUNCTION changefeed.operation_name(op "char") RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE op WHEN 'c' THEN 'create' WHEN 'r' THEN 'replace' WHEN 'm' THEN 'replace'
                   WHEN 'd' THEN 'delete' WHEN 't' THEN 'clear' END
$$;

-- The operation a read scoped to `tenants` (null: not scoped) sees of a
-- change, null when the change is not the tenants'.  A row that moved from
-- one tenant to another (op 'm') is a replace for a read of both or of all,
-- a create (without its image from before) for the tenant it went to and a
-- delete (without its image after) for the one it left: no tenant sees
-- another's row.  Clears pass.  The C reader does the same (read_window.cpp).
CREATE OR REPLACE FUNCTION changefeed.op_seen(op "char", tenant text, previous_tenant text, tenants text[]) RETURNS "char"
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN tenants IS NULL THEN CASE WHEN op = 'm' THEN 'r'::"char" ELSE op END
        WHEN op = 't' THEN op
        WHEN op <> 'm' THEN CASE WHEN tenant = ANY (tenants) THEN op END
        WHEN tenant = ANY (tenants) THEN CASE WHEN previous_tenant = ANY (tenants) THEN 'r'::"char" ELSE 'c'::"char" END
        WHEN previous_tenant = ANY (tenants) THEN 'd'::"char"
    END
$$;

-- Reads the changes of `tbl` after `since`.
--   max_changes  at most this many rows (1 .. 100000)
--   ranges       only these range ids (null = all)
--   mode         'all': every version, deletes and clears included;
--                'latest': per window, the latest version of each changed
--                document; documents whose latest change is a delete or a
--                clear do not appear.
--   filter       a jsonpath predicate over the document, with its variables in
--                filter_vars (values are never spliced into the path), e.g.
--                filter => '$.status == $s', filter_vars => '{"s": "open"}'.
--                See filter_matches() for deletes and clears.
--   doc_ids      only changes of these documents (clears pass).
--   tenant       only changes of this tenant (collections with a tenant column;
--                clears pass).  A role bound to a tenant (bind_tenant) reads
--                only its tenant's changes, whatever it asks.  A row moved
--                to another tenant is a delete for the old tenant and a
--                create for the new one (op_seen).
-- The caller needs SELECT on the table (42501 otherwise).
-- Rows come window by window (a window = what committed between two
-- snapshots), in seq order inside a window.  Each row carries the position
-- after it.  When a window is exhausted the read rolls over into the next one.
-- A large backlog is read in windows bounded by the notifier's ticks.
-- After a read that returned nothing, the position to keep is the read's own
-- snapshot: call read() and current_position() in one REPEATABLE READ
-- transaction.
-- event_id is "<collection id>.<txid>.<seq>": the same on every read of the
-- change by anyone, what a consumer deduplicates on (47_dedup.sql); the two
-- sides of a tenant move, as tenant-scoped reads see it, add ".create" and
-- ".delete".
-- JIT is off: a page's queries run in milliseconds, and compiling them (which
-- the estimates of a cached generic plan asked for) took longer than that.
-- Plans are generic: a session plans read()'s statements once, not on every
-- call (planning them over the log's partitions took longer than running them
-- for the few rows of a wake-up).
-- work_mem is raised for read() and read_ranges(): each holds a page (at most
-- max_changes rows) in a result set, and with the default 4 MB a page of
-- 10,000 changes went to a temporary file, once per function on its way out.
-- Whether a change passes a read's filter: creates and replaces are tested on
-- the document after the write, deletes on the one before it when the
-- collection keeps previous images (passed through otherwise), clears always
-- pass.  A filter that errors or is not a boolean counts as no match.
CREATE OR REPLACE FUNCTION changefeed.filter_matches(op "char", current jsonb, previous jsonb,
                                                     filter jsonpath, filter_vars jsonb) RETURNS bool
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN filter IS NULL OR op = 't' THEN true
        WHEN op = 'd' THEN previous IS NULL
                        OR coalesce(pg_catalog.jsonb_path_match(previous, filter, coalesce(filter_vars, '{}'), true), false)
        ELSE coalesce(pg_catalog.jsonb_path_match(current, filter, coalesce(filter_vars, '{}'), true), false)
    END
$$;

-- read() in C (extension/read_window.cpp) without a jsonpath filter, what
-- processors read: from the position (lo, hi, last_seq), the windows and
-- their pages, the same rows read() returns in mode 'all' or, with `latest`,
-- mode 'latest'; and the backlog estimate that chooses a window's shape, for
-- read()'s SQL statement (jsonpath filters).
CREATE OR REPLACE FUNCTION changefeed.read_windows(collection_id int, ranges int[], lo pg_snapshot, hi pg_snapshot,
                                                   after bigint, max_changes int, doc_ids text[], tenants text[],
                                                   latest bool)
RETURNS TABLE (seq bigint, txid xid8, range_id int, operation text, doc_id text, partition_key text,
               current jsonb, previous jsonb, ttl_expired bool, written_at timestamptz, tenant text,
               "position" text, event_id text)
AS 'MODULE_PATHNAME', 'changefeed_read_windows' LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION changefeed.window_backlog(collection_id int, ranges int[], lo pg_snapshot, upto pg_snapshot,
                                                     stop_at int) RETURNS int
AS 'MODULE_PATHNAME', 'changefeed_window_backlog' LANGUAGE C STABLE;

CREATE OR REPLACE FUNCTION changefeed.read(
    tbl regclass,
    since text,
    max_changes int DEFAULT 1000,
    ranges int[] DEFAULT NULL,
    mode text DEFAULT 'all',
    filter jsonpath DEFAULT NULL,
    filter_vars jsonb DEFAULT NULL,
    doc_ids text[] DEFAULT NULL,
    only_tenant text DEFAULT NULL)   -- `tenant` in the entry point (surface.manifest)
RETURNS TABLE (
    seq bigint,
    txid xid8,
    range_id int,
    operation text,
    doc_id text,
    partition_key text,
    current jsonb,
    previous jsonb,
    ttl_expired bool,
    written_at timestamptz,
    tenant text,
    "position" text,
    event_id text)   -- the change's identity, the same on every redelivery
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET jit = off SET plan_cache_mode = force_generic_plan SET work_mem = '64MB' AS $$
#variable_conflict use_column
DECLARE
    c changefeed.collection;
    p record;
    lo pg_snapshot;
    hi pg_snapshot;
    after bigint;
    remaining int := max_changes;
    wanted int[];
    n int;
    windows int := 0;
    at_current bool;
    current_snap pg_snapshot;
    backlog int;
    tenants text[];
    lo_xmax xid8;
    hi_xmax xid8;
    lo_xip xid8[];
    tick_rows int := coalesce(nullif(current_setting('changefeed.tick_rows', true), '')::int, 1000);
BEGIN
    PERFORM changefeed.check_read_args(mode, max_changes);
    c := changefeed.collection_of(tbl);
    tenants := changefeed.require_read(tbl, changefeed.caller(), c.tenant_column, only_tenant);
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
    IF ranges IS NULL THEN
        wanted := ARRAY(SELECT generate_series(0, c.ranges - 1));
    ELSE
        IF EXISTS (SELECT 1 FROM unnest(ranges) r WHERE r IS NULL OR r < 0 OR r >= c.ranges) THEN
            RAISE EXCEPTION 'range ids must be between 0 and %', c.ranges - 1
                USING ERRCODE = 'CF020';
        END IF;
        wanted := ranges;
    END IF;

    IF filter IS NULL THEN
        -- What processors read: in C, the same rows (read_window.cpp).
        RETURN QUERY SELECT * FROM changefeed.read_windows(c.id, wanted, p.lo, p.hi, p.last_seq, max_changes,
                                                           doc_ids, tenants, mode = 'latest');
        RETURN;
    END IF;
    lo := p.lo;
    hi := p.hi;
    after := p.last_seq;
    LOOP
        at_current := false;
        -- What `lo` has not delivered: transactions from its xmax on, and
        -- those it saw in progress (its xip, a short list).  A window is
        -- scanned by those two sets, never from xmin(lo): a transaction
        -- left open for long (idle in transaction, a long batch job) keeps
        -- xmin(lo) back, but costs one index lookup of its xid per read.
        lo_xmax := pg_snapshot_xmax(lo);
        lo_xip := ARRAY(SELECT pg_snapshot_xip(lo));
        IF hi IS NULL THEN
            -- Open the next window, up to this statement's snapshot: later
            -- statements see at least as much, so every row visible in `hi`
            -- is visible to the scan below.
            current_snap := changefeed.snapshot_now();  -- right on a hot standby too
            IF pg_snapshot_xmax(current_snap) < pg_snapshot_xmax(lo) THEN
                RETURN;  -- the position is newer than our snapshot: nothing yet
            END IF;
            -- More than the page's backlog is read in windows bounded by
            -- ticks, less in a single window up to now.  Counting stops one
            -- row past the page, from the index alone (an upper bound: rows
            -- of aborted transactions count too).
            backlog := changefeed.window_backlog(c.id, wanted, lo, current_snap, remaining + 1);
            IF backlog > remaining THEN
                -- A tick taken after `lo` (larger xmax) sees everything `lo`
                -- sees.  The notifier ticks every tick_rows changes (of all
                -- collections), so a window of the page's size spans about
                -- remaining / tick_rows ticks: one window per page, not one
                -- per tick.
                SELECT t.snap INTO hi FROM changefeed.tick t
                 WHERE t.snap_xmax > pg_snapshot_xmax(lo) AND t.snap_xmax <= pg_snapshot_xmax(current_snap)
                 ORDER BY t.snap_xmax
                OFFSET greatest(remaining / tick_rows - 1, 0) LIMIT 1;
                IF hi IS NULL THEN
                    SELECT t.snap INTO hi FROM changefeed.tick t
                     WHERE t.snap_xmax > pg_snapshot_xmax(lo) AND t.snap_xmax <= pg_snapshot_xmax(current_snap)
                     ORDER BY t.snap_xmax DESC LIMIT 1;
                END IF;
            END IF;
            IF hi IS NULL THEN
                hi := current_snap;
                at_current := true;
            END IF;
            after := 0;
        END IF;
        hi_xmax := pg_snapshot_xmax(hi);

        -- The window: visible in `hi`, not in `lo`.  "Not visible in lo" is
        -- exactly "txid >= xmax(lo) or txid in xip(lo)"; the two parts are
        -- disjoint (xip(lo) < xmax(lo)), each an index scan of its own.
        -- A page is the window's rows after `after`, one past the budget:
        -- that extra row only tells whether the window goes on.  Each row
        -- carries the position after it; the last row of an exhausted
        -- window carries `hi` alone.
        -- One statement for both modes: the arm of the other mode is gated
        -- off by `mode` and never runs (nor does window_rows in mode 'all').
        RETURN QUERY
        WITH window_rows AS (
            SELECT l.* FROM changefeed.log l
             WHERE l.collection_id = c.id
               AND l.range_id = ANY (wanted)
               AND l.txid >= lo_xmax
               AND l.txid < hi_xmax
               AND pg_visible_in_snapshot(l.txid, hi)
            UNION ALL
            SELECT l.* FROM changefeed.log l
             WHERE l.collection_id = c.id
               AND l.range_id = ANY (wanted)
               AND l.txid = ANY (lo_xip)
               AND pg_visible_in_snapshot(l.txid, hi)
        ),
        page AS MATERIALIZED (
            -- 'all': every row after `after`, scanned directly.
            SELECT a.* FROM (
                SELECT w.*, s.seen FROM (
                    SELECT l.* FROM changefeed.log l
                     WHERE l.collection_id = c.id
                       AND l.range_id = ANY (wanted)
                       AND l.txid >= lo_xmax
                       AND l.txid < hi_xmax
                       AND pg_visible_in_snapshot(l.txid, hi)
                       AND l.seq > after
                    UNION ALL
                    SELECT l.* FROM changefeed.log l
                     WHERE l.collection_id = c.id
                       AND l.range_id = ANY (wanted)
                       AND l.txid = ANY (lo_xip)
                       AND pg_visible_in_snapshot(l.txid, hi)
                       AND l.seq > after) w
                -- What the read's tenants see of the change (op_seen).
                CROSS JOIN LATERAL (SELECT CASE WHEN tenants IS NULL AND w.op <> 'm' THEN w.op
                                                ELSE changefeed.op_seen(w.op, w.tenant, w.previous_tenant, tenants)
                                           END AS seen) s
                 WHERE mode = 'all'
                   AND (doc_ids IS NULL OR w.op = 't' OR w.doc_id = ANY (doc_ids))
                   AND s.seen IS NOT NULL
                   AND (filter IS NULL OR changefeed.filter_matches(s.seen, w.current, w.previous, filter, filter_vars))
                 ORDER BY w.seq
                 LIMIT remaining + 1) a
            UNION ALL
            -- 'latest': per document the window's last version, unless a
            -- delete or a later clear of its range ends it.
            SELECT b.* FROM (
                SELECT v.*, s.seen FROM (
                    SELECT DISTINCT ON (w.range_id, w.doc_id) w.*
                      FROM window_rows w
                     WHERE mode = 'latest' AND w.op <> 't'
                     ORDER BY w.range_id, w.doc_id, w.seq DESC
                ) v
                -- The last clear of each range: one row per range that has one,
                -- so the join stays small whatever plan is chosen.
                LEFT JOIN (SELECT t.range_id, max(t.seq) AS seq
                             FROM window_rows t WHERE t.op = 't' GROUP BY t.range_id) cl
                       ON cl.range_id = v.range_id
                -- A move away from the read's tenants ends the document as a delete does.
                CROSS JOIN LATERAL (SELECT CASE WHEN tenants IS NULL AND v.op <> 'm' THEN v.op
                                                ELSE changefeed.op_seen(v.op, v.tenant, v.previous_tenant, tenants)
                                           END AS seen) s
                 WHERE s.seen <> 'd' AND v.seq > after
                   AND (cl.seq IS NULL OR v.seq > cl.seq)
                   AND (doc_ids IS NULL OR v.doc_id = ANY (doc_ids))
                   AND (filter IS NULL OR changefeed.filter_matches(s.seen, v.current, v.previous, filter, filter_vars))
                 ORDER BY v.seq
                 LIMIT remaining + 1) b
        ),
        bounds AS (SELECT count(*) AS total, max(pg.seq) AS top FROM page pg),
        ends AS MATERIALIZED (SELECT b.total, b.top,
                        CASE WHEN b.total <= remaining THEN b.top
                             ELSE (SELECT max(pg.seq) FROM page pg WHERE pg.seq < b.top) END AS last
                   FROM bounds b)
        SELECT k.seq, k.txid, k.range_id,
               CASE k.seen WHEN 'c' THEN 'create' WHEN 'r' THEN 'replace'
                           WHEN 'd' THEN 'delete' WHEN 't' THEN 'clear' END,
               k.doc_id, k.partition_key,
               -- A move: the tenant it went to gets no image from before, the
               -- one it left no image after.
               CASE WHEN k.seen = 'd' THEN NULL ELSE k.current END,
               CASE WHEN k.seen = 'c' THEN NULL ELSE k.previous END,
               k.ttl_expired, k.written_at,
               CASE WHEN k.seen = 'd' AND k.op = 'm' THEN k.previous_tenant ELSE k.tenant END,
               CASE WHEN k.seq <> e.last THEN changefeed.position_encode(lo, hi, k.seq)
                    -- The page's last row: its position is also left in
                    -- changefeed.read_position (docs/options.md).
                    ELSE pg_catalog.set_config('changefeed.read_position',
                             CASE WHEN e.total <= remaining
                                  THEN changefeed.position_encode(hi, NULL, 0)   -- window exhausted
                                  ELSE changefeed.position_encode(lo, hi, k.seq) END, true) END,
               c.id::text || '.' || k.txid::text || '.' || k.seq::text
                   -- The two sides of a move are two events.
                   || CASE WHEN k.op = 'm' AND k.seen = 'c' THEN '.create'
                           WHEN k.op = 'm' AND k.seen = 'd' THEN '.delete' ELSE '' END
          FROM page k CROSS JOIN ends e
         WHERE k.seq <= e.last
         ORDER BY k.seq;
        GET DIAGNOSTICS n = ROW_COUNT;

        remaining := remaining - n;
        windows := windows + 1;
        -- Stop when the page is full or a window up to now was read: an empty
        -- result then means nothing is pending up to this statement's
        -- snapshot (in REPEATABLE READ, current_position()).  Tick windows
        -- roll on into the next window.
        EXIT WHEN remaining = 0 OR at_current;
        lo := hi;
        hi := NULL;
    END LOOP;
END
$$;

-- Reads many ranges of `tbl`, each from its own position, in one call: the
-- wake-up of a processor instance over all the ranges it owns.
--   ranges, positions  range ids and the position each resumes from (same
--                      length, no nulls, no range twice)
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
-- The rows come from extension/read_window.cpp (changefeed_read_ranges):
-- read_ranges_plan() checks the call and plans the groups, C reads them
-- straight into the result.
CREATE OR REPLACE FUNCTION changefeed.read_ranges(
    tbl regclass,
    ranges int[],
    positions text[],
    max_changes int DEFAULT 1000,
    mode text DEFAULT 'all',
    only_tenant text DEFAULT NULL)   -- `tenant` in the entry point (surface.manifest)
RETURNS TABLE (
    seq bigint,
    txid xid8,
    range_id int,
    operation text,
    doc_id text,
    partition_key text,
    current jsonb,
    previous jsonb,
    ttl_expired bool,
    written_at timestamptz,
    tenant text,
    "position" text,
    event_id text,
    resume_ranges int[])   -- marker rows only
LANGUAGE c VOLATILE SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'changefeed_read_ranges';

-- read_ranges()'s checks, and its groups in the order they are read: one row
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
BEGIN
    PERFORM changefeed.check_read_args(mode, max_changes);
    c := changefeed.collection_of(tbl);
    -- The rights are checked here too: an empty call reads nothing but still needs them.
    tenants := changefeed.require_read(tbl, changefeed.caller(), c.tenant_column, only_tenant);
    IF ranges IS NULL OR positions IS NULL
       OR coalesce(array_length(ranges, 1), 0) <> coalesce(array_length(positions, 1), 0) THEN
        RAISE EXCEPTION 'ranges and positions must be arrays of the same length'
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
    -- snapshot taken at different WAL positions read alike.
    FOR g IN
        SELECT q.pos, q.rs, q.lo, q.hi, q.last_seq, pg_snapshot_xmax(coalesce(q.hi, q.lo)) AS upto,
               CASE WHEN h.dropped_txid IS NULL THEN true
                    ELSE changefeed.snapshot_covers(q.lo, h.dropped_txid) END AS covered
          FROM (SELECT min(t.pos) AS pos, array_agg(x ORDER BY x) AS rs, (array_agg(d.lo))[1] AS lo,
                       (array_agg(d.hi))[1] AS hi, d.last_seq
                  FROM (SELECT p.pos, array_agg(p.r) AS rs
                          FROM unnest(ranges, positions) AS p(r, pos) GROUP BY p.pos) t
                  CROSS JOIN LATERAL changefeed.position_decode(t.pos) d
                  CROSS JOIN LATERAL unnest(t.rs) x
                 GROUP BY d.lo::text, d.hi::text, d.last_seq) q
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
