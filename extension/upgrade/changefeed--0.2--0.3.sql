-- changefeed: upgrade from release 0.2 to 0.3.
--
-- Every schema change of 0.3 made in extension/sql/ is repeated here, so that
-- an upgraded database ends with the same objects as a fresh install
-- (test/upgrade.sh compares the two).

-- The changefeed command-line tool (checkpoint, resync): range ids checked,
-- reset_checkpoint() refusing a position whose history is lost and locking
-- leases in range order, resync_processor() new.
CREATE FUNCTION changefeed.check_range_ids(c changefeed.collection, range_ids int[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF range_ids IS NOT NULL
       AND (cardinality(range_ids) = 0
            OR EXISTS (SELECT 1 FROM unnest(range_ids) r WHERE r IS NULL OR r < 0 OR r >= c.ranges)) THEN
        RAISE EXCEPTION 'range ids must be between 0 and %', c.ranges - 1
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION changefeed.check_range_ids(changefeed.collection, int[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION changefeed._reset_checkpoint(tbl regclass, processor text, "position" text DEFAULT NULL,
                                            range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    pos text := coalesce("position", changefeed.current_position());
    n int;
BEGIN
    PERFORM changefeed.check_range_ids(c, range_ids);
    PERFORM changefeed.check_history(c, (changefeed.position_decode(pos)).lo);
    PERFORM 1 FROM changefeed.lease l   -- in range order (see lease_renew)
      WHERE l.collection_id = c.id AND l.processor = processor
        AND (range_ids IS NULL OR l.range_id = ANY (range_ids))
      ORDER BY l.range_id FOR NO KEY UPDATE;
    UPDATE changefeed.lease l
       SET checkpoint = pos, owner = NULL, expires_at = NULL, epoch = l.epoch + 1,
           backfill_done = true, backfill_after = NULL, backfill_position = NULL, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor
       AND (range_ids IS NULL OR l.range_id = ANY (range_ids));
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
        RAISE EXCEPTION 'processor "%" has never run on %', processor, tbl
            USING ERRCODE = 'CF012', HINT = 'Leases are created when a processor first starts.';
    END IF;
    RETURN n;
END
$$;

CREATE FUNCTION changefeed._resync_processor(tbl regclass, processor text, range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    pos text := changefeed.current_position();
    n int;
BEGIN
    PERFORM changefeed.check_range_ids(c, range_ids);
    PERFORM 1 FROM changefeed.lease l   -- in range order (see lease_renew)
      WHERE l.collection_id = c.id AND l.processor = processor
        AND (range_ids IS NULL OR l.range_id = ANY (range_ids))
      ORDER BY l.range_id FOR NO KEY UPDATE;
    UPDATE changefeed.lease l
       SET checkpoint = pos, owner = NULL, expires_at = NULL, epoch = l.epoch + 1,
           backfill_done = false, backfill_after = NULL, backfill_rows = 0, backfill_position = pos,
           updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor
       AND (range_ids IS NULL OR l.range_id = ANY (range_ids));
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
        RAISE EXCEPTION 'processor "%" has never run on %', processor, tbl
            USING ERRCODE = 'CF012', HINT = 'Leases are created when a processor first starts.';
    END IF;
    RETURN n;
END
$$;
REVOKE ALL ON FUNCTION changefeed._resync_processor(regclass, text, int[]) FROM PUBLIC;
CREATE FUNCTION changefeed.resync_processor(tbl regclass, processor text, range_ids int[] DEFAULT NULL)
RETURNS integer LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'changefeed_call_definer';
REVOKE ALL ON FUNCTION changefeed.resync_processor(regclass, text, int[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION changefeed.resync_processor(regclass, text, int[]) TO changefeed_processor;
