-- changefeed: waiting until a processor has handled everything committed
-- before a position (read-your-writes, and tests that would otherwise poll).
--
-- A range is behind a position while its log holds a change the position's
-- snapshot sees (committed before it) that the range's stored checkpoint does
-- not cover: not visible in the checkpoint's snapshot, nor delivered already
-- from a window being paged (visible in its hi, seq up to last_seq).  A
-- checkpoint is stored after the handler returned (for a transactional
-- handler, in the projection's own transaction), so "not behind" means
-- handled and checkpointed.  Nothing is decoded but the two positions; the
-- log is read by its index (collection, range, txid, seq), changes not read.

-- The ranges of `processor` behind `pos`, each with how many changes it has
-- still to handle up to it (counted to 1000).
CREATE OR REPLACE FUNCTION changefeed.ranges_behind(c changefeed.collection, processor text, pos text)
RETURNS TABLE (range_id int, pending bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    target record := changefeed.position_decode(pos);
    upto xid8;
    l changefeed.lease;
    cp record;
    n bigint;
BEGIN
    upto := greatest(pg_snapshot_xmax(target.lo), coalesce(pg_snapshot_xmax(target.hi), '0'::xid8));
    FOR l IN SELECT * FROM changefeed.lease x WHERE x.collection_id = c.id AND x.processor = processor
              ORDER BY x.range_id LOOP
        cp := changefeed.position_decode(l.checkpoint);
        PERFORM changefeed.check_history(c, cp.lo);
        SELECT count(*) INTO n FROM (
            (SELECT 1 FROM changefeed.log g
              WHERE g.collection_id = c.id AND g.range_id = l.range_id
                AND g.txid >= pg_snapshot_xmax(cp.lo) AND g.txid < upto
                AND (pg_visible_in_snapshot(g.txid, target.lo)
                     OR (target.hi IS NOT NULL AND pg_visible_in_snapshot(g.txid, target.hi)
                         AND g.seq <= target.last_seq))
                AND NOT (cp.hi IS NOT NULL AND pg_visible_in_snapshot(g.txid, cp.hi) AND g.seq <= cp.last_seq)
              LIMIT 1000)
            UNION ALL
            (SELECT 1 FROM changefeed.log g
              WHERE g.collection_id = c.id AND g.range_id = l.range_id
                AND g.txid = ANY (ARRAY(SELECT pg_snapshot_xip(cp.lo)))
                AND (pg_visible_in_snapshot(g.txid, target.lo)
                     OR (target.hi IS NOT NULL AND pg_visible_in_snapshot(g.txid, target.hi)
                         AND g.seq <= target.last_seq))
                AND NOT (cp.hi IS NOT NULL AND pg_visible_in_snapshot(g.txid, cp.hi) AND g.seq <= cp.last_seq)
              LIMIT 1000)) u;
        IF n > 0 THEN
            range_id := l.range_id;
            pending := least(n, 1000);
            RETURN NEXT;
        END IF;
    END LOOP;
END
$$;

-- Returns once `processor` has handled and checkpointed every change of
-- `tbl` committed before `pos` (current_position() after a write: that
-- write), in every range, whichever instance holds it.  CF023 after
-- `timeout`, naming the ranges behind; CF006 / CF019 when a range's history
-- was lost.  Each look takes a new snapshot, so READ COMMITTED only (25000
-- otherwise: a snapshot that never moves would wait forever).  Who may:
-- whoever may watch the processor (its owning role, the table's owner, an
-- admin; lag() has the same rule).
CREATE OR REPLACE FUNCTION changefeed.wait_for(tbl regclass, processor text, pos text,
                                               timeout interval DEFAULT '30 seconds')
RETURNS void LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_watched(tbl, processor);
    deadline timestamptz;
    behind text;
BEGIN
    IF timeout IS NULL OR timeout < '0'::interval OR timeout > '1 hour'::interval THEN
        RAISE EXCEPTION 'timeout must be between 0 and 1 hour' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'changefeed.wait_for() needs READ COMMITTED: in % its snapshot never sees the processor move',
                        upper(current_setting('transaction_isolation'))
            USING ERRCODE = '25000', HINT = 'Call it in a READ COMMITTED transaction, or on its own.';
    END IF;
    PERFORM changefeed.position_decode(pos);  -- CF004 / CF005 before any wait
    deadline := clock_timestamp() + timeout;
    LOOP
        SELECT string_agg(format('%s (%s%s)', b.range_id, b.pending, CASE WHEN b.pending >= 1000 THEN ' or more' ELSE '' END),
                          ', ' ORDER BY b.range_id)
          INTO behind FROM changefeed.ranges_behind(c, processor, pos) b;
        IF behind IS NULL THEN
            RETURN;
        END IF;
        IF clock_timestamp() >= deadline THEN
            RAISE EXCEPTION 'processor "%" on % has not handled every change before the position within %',
                            processor, tbl, timeout
                USING ERRCODE = 'CF023',
                      DETAIL = format('Ranges behind (changes still to handle): %s.', behind),
                      HINT = format('Is the processor running? SELECT * FROM changefeed.lag(%L, %L) says how far '
                                    'behind each range is; wait longer if it moves.', tbl::text, processor);
        END IF;
        PERFORM pg_sleep(0.01);
    END LOOP;
END
$$;

-- Whether a reader at `pos` has read past everything committed before
-- `target`: every transaction the target's snapshot sees, the position's
-- sees too.  A window being paged counts as not yet read (its lo alone), so
-- the answer may be "not yet" a little longer than it has to be, never "yes"
-- too early.  For readers that keep their own position (subscriptions, the
-- CLI, a SQL reader): the counterpart of wait_for() for processors.
CREATE OR REPLACE FUNCTION changefeed.position_covers(pos text, target text) RETURNS bool
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p record := changefeed.position_decode(pos);
    t record := changefeed.position_decode(target);
    seen pg_snapshot := coalesce(t.hi, t.lo);  -- what the target has seen, a window included
BEGIN
    RETURN pg_snapshot_xmax(seen) <= pg_snapshot_xmax(p.lo)
       AND NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(p.lo) x
                        WHERE pg_visible_in_snapshot(x, seen));
END
$$;
