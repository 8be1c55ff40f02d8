-- changefeed: lag of a processor, per range.
--
-- pending counts the changes after the range's checkpoint by reading them,
-- up to `count_limit` (default 10000): below the limit the count is exact,
-- at the limit it is a lower bound (pending_exact = false).  retention_used is
-- the share of the collection's retention that the oldest pending change has
-- used: at 1.0 retention starts dropping what the processor has not read.
CREATE FUNCTION changefeed.lag(tbl regclass, processor text, count_limit int DEFAULT 10000)
RETURNS TABLE (
    range_id int,
    owner text,
    live bool,
    epoch bigint,
    checkpoint_age interval,
    pending bigint,
    pending_exact bool,
    oldest_pending timestamptz,
    retention_used numeric,
    history_lost bool)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    l changefeed.lease;
BEGIN
    IF count_limit IS NULL OR count_limit < 1 OR count_limit > 100000 THEN
        RAISE EXCEPTION 'count_limit must be between 1 and 100000' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM changefeed.lease x WHERE x.collection_id = c.id AND x.processor = processor) THEN
        RAISE EXCEPTION 'processor "%" has never run on %', processor, tbl
            USING ERRCODE = 'CF012', HINT = 'Leases are created when a processor first starts.';
    END IF;
    FOR l IN SELECT * FROM changefeed.lease x WHERE x.collection_id = c.id AND x.processor = processor
              ORDER BY x.range_id LOOP
        range_id := l.range_id;
        owner := l.owner;
        live := l.owner IS NOT NULL AND l.expires_at > now();
        epoch := l.epoch;
        checkpoint_age := now() - l.updated_at;
        history_lost := false;
        BEGIN
            SELECT count(*), min(r.written_at) INTO pending, oldest_pending
              FROM changefeed.read(tbl, l.checkpoint, count_limit, ARRAY[l.range_id]) r;
        EXCEPTION WHEN SQLSTATE 'CF006' THEN
            history_lost := true;
            pending := NULL;
            oldest_pending := NULL;
        END;
        pending_exact := pending IS NOT NULL AND pending < count_limit;
        retention_used := CASE WHEN history_lost THEN 1
                               WHEN oldest_pending IS NULL THEN 0
                               ELSE round((extract(epoch FROM now() - oldest_pending)
                                           / extract(epoch FROM c.retention))::numeric, 4) END;
        RETURN NEXT;
    END LOOP;
END
$$;

-- What retention dropped, or capture missed while disabled (cause), per
-- collection whose table the querying role may SELECT.
CREATE VIEW changefeed.horizons WITH (security_barrier) AS
SELECT c.relid AS table_name, h.collection_id, h.dropped_txid, h.dropped_before, h.dropped_at,
       h.cause, h.disabled_from
  FROM changefeed.horizon h JOIN changefeed.collection c ON c.id = h.collection_id
 WHERE pg_catalog.has_table_privilege(c.relid, 'SELECT');
