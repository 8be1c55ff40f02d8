-- changefeed: changing the number of ranges of a live collection.
--
-- A document's range is range_of(partition key, ranges) (capture/enable.sql), and
-- every log row keeps the partition-key text it was hashed from.  So a range
-- change is done in one transaction that holds a lock stopping writers:
--   1. the collection's logged rows are tagged with their new range (clears,
--      one row per range, are spread over the new ranges in their place in
--      seq order);
--   2. each processor's new range r takes the checkpoint of the old ranges
--      whose documents it now holds: with the new count a multiple of the
--      old, exactly one (r mod old), whose checkpoint carries over as it is;
--      otherwise every old range q with q = r (mod gcd), and the position
--      that has delivered only what all of theirs have (redelivery, no loss);
--   3. every lease loses its owner and moves to a new epoch, so running
--      instances are fenced (CF010) and acquire the new ranges afresh;
--   4. the capture triggers are installed for the new count.
-- Why nothing is lost: a checkpoint is a snapshot `lo` (plus progress inside
-- one window), i.e. the set of transactions whose rows were delivered, and a
-- read of range r returns every row tagged r that `lo` does not cover.  A row
-- now tagged r was tagged with one of r's old ranges q; if the new checkpoint
-- covers it, so did q's checkpoint, and q delivered it.  Rows written after
-- the change commit after it, so no checkpoint taken before it covers them.
-- A reader still on the old layout sees the old tags until the change
-- commits, and cannot checkpoint afterwards (fenced).  A document stays in
-- one range, its rows in seq order: per-document order holds.

-- The position that has delivered nothing that any of `positions` has not:
-- its snapshot sees as committed exactly what all of theirs see as committed
-- (their xmax at the smallest, their in-progress lists merged).  A window in
-- progress is dropped (read again).  One position comes back as it is.
CREATE OR REPLACE FUNCTION changefeed.oldest_position(positions text[]) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    top xid8;
    xips xid8[];
BEGIN
    IF positions IS NULL OR cardinality(positions) = 0 OR array_position(positions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'positions must be a non-empty array without nulls' USING ERRCODE = 'CF004';
    END IF;
    IF (SELECT count(DISTINCT p) FROM unnest(positions) p) = 1 THEN
        RETURN positions[1];
    END IF;
    SELECT min(pg_snapshot_xmax(d.lo)) INTO top
      FROM unnest(positions) p CROSS JOIN LATERAL changefeed.position_decode(p) d;
    xips := ARRAY(SELECT DISTINCT x
                    FROM unnest(positions) p
                    CROSS JOIN LATERAL changefeed.position_decode(p) d
                    CROSS JOIN LATERAL pg_snapshot_xip(d.lo) x
                   WHERE x < top ORDER BY x);
    RETURN changefeed.position_encode(
        format('%s:%s:%s', coalesce(xips[1], top), top, array_to_string(xips, ','))::pg_snapshot, NULL, 0);
END
$$;

-- Moves collection `c` to `n` ranges: its logged rows, its processors'
-- leases and the collection row (steps 1-3 above; the caller installs the
-- triggers).  Takes the table lock that stops writers.  Returns the
-- collection as changed.
CREATE OR REPLACE FUNCTION changefeed.change_ranges(c changefeed.collection, n int) RETURNS changefeed.collection
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    old int := c.ranges;
    g int;
    p text;
    l changefeed.lease;
    top bigint;
    checkpoints text[];
    cp text;
    classes changefeed.lease[];
    fresh changefeed.lease[];
BEGIN
    PERFORM changefeed.check_ranges_count(n);
    -- Writers wait from here to commit (and those in progress finish first):
    -- no row is logged under either layout meanwhile.  The table first, then
    -- the collection row, as disable() and enable() lock them.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', c.relid::regclass);
    SELECT * INTO c FROM changefeed.collection x WHERE x.id = c.id FOR UPDATE;
    old := c.ranges;
    IF n = old THEN
        RETURN c;
    END IF;
    -- The processors' rows, then their leases, in the order lease writers
    -- lock them; every lease changes hands (leases_moved).
    UPDATE changefeed.processor x SET lease_generation = x.lease_generation + 1 WHERE x.collection_id = c.id;
    PERFORM 1 FROM changefeed.lease x WHERE x.collection_id = c.id ORDER BY x.processor, x.range_id FOR UPDATE;

    -- 1. The logged rows.
    UPDATE changefeed.log x SET range_id = changefeed.range_of(x.partition_key, n)
     WHERE x.collection_id = c.id AND x.partition_key IS NOT NULL
       AND x.range_id <> changefeed.range_of(x.partition_key, n);
    -- A TRUNCATE logged one clear per range, ranges 0 .. old-1 in seq order,
    -- with no other row of the collection between them: new range r takes the
    -- place (seq) of old range r mod old.
    WITH gone AS (
        DELETE FROM changefeed.log x WHERE x.collection_id = c.id AND x.op = 't'
        RETURNING x.seq, x.txid, x.range_id, x.written_at)
    INSERT INTO changefeed.log (seq, txid, collection_id, range_id, op, written_at)
    SELECT gone.seq, gone.txid, c.id, r, 't', gone.written_at
      FROM gone CROSS JOIN LATERAL generate_series(0, n - 1) r
     WHERE gone.range_id = r % old;

    -- 2, 3. The leases, processor by processor.  New range r is fed by the
    -- old ranges of its class r mod g: what each class inherits is worked
    -- out once.
    g := gcd(old, n);
    FOR p IN SELECT DISTINCT x.processor FROM changefeed.lease x WHERE x.collection_id = c.id ORDER BY 1 LOOP
        SELECT max(x.epoch) + 1 INTO top FROM changefeed.lease x WHERE x.collection_id = c.id AND x.processor = p;
        classes := '{}';
        FOR k IN 0 .. g - 1 LOOP
            SELECT * INTO l FROM changefeed.lease x WHERE x.collection_id = c.id AND x.processor = p AND x.range_id = k;
            IF old > g THEN
                -- Several old ranges: the oldest of their checkpoints.  A
                -- backfill still running in one of them runs again over the
                -- new range, with the log from that checkpoint after it.
                SELECT array_agg(x.checkpoint ORDER BY x.range_id), bool_and(x.backfill_done)
                  INTO checkpoints, l.backfill_done
                  FROM changefeed.lease x
                 WHERE x.collection_id = c.id AND x.processor = p AND x.range_id % g = k;
                BEGIN
                    l.checkpoint := changefeed.oldest_position(checkpoints);
                EXCEPTION WHEN SQLSTATE 'CF004' OR SQLSTATE 'CF005' THEN
                    -- One is no position here (a restored database, a damaged
                    -- checkpoint): it is kept, and the range reports history lost.
                    FOREACH cp IN ARRAY checkpoints LOOP
                        BEGIN
                            PERFORM changefeed.position_decode(cp);
                        EXCEPTION WHEN SQLSTATE 'CF004' OR SQLSTATE 'CF005' THEN
                            l.checkpoint := cp;
                            EXIT;
                        END;
                    END LOOP;
                END;
                l.backfill_after := NULL;
                l.backfill_rows := 0;
                l.backfill_position := CASE WHEN NOT l.backfill_done THEN l.checkpoint END;
            END IF;
            classes := classes || l;
        END LOOP;
        fresh := '{}';
        FOR r IN 0 .. n - 1 LOOP
            l := classes[r % g + 1];
            CONTINUE WHEN l.collection_id IS NULL;   -- a lease set is complete; nothing to inherit otherwise
            l.range_id := r;
            l.owner := NULL;
            l.epoch := top;
            l.updated_at := now();
            fresh := fresh || l;
        END LOOP;
        DELETE FROM changefeed.lease x WHERE x.collection_id = c.id AND x.processor = p;
        INSERT INTO changefeed.lease SELECT * FROM unnest(fresh);
    END LOOP;

    UPDATE changefeed.collection x SET ranges = n WHERE x.id = c.id RETURNING * INTO c;
    RETURN c;
END
$$;
