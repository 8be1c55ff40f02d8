-- changefeed: lag of a processor, per range.
--
-- pending counts the changes after the range's checkpoint by reading them,
-- up to `count_limit` (default 10000): below the limit the count is exact,
-- at the limit it is a lower bound (pending_exact = false).  retention_used is
-- the share of the collection's retention that the oldest pending change has
-- used: at 1.0 retention starts dropping what the processor has not read.
-- The changes are counted with the caller's rights, as read() would return
-- them: SELECT on the table, only the tenants it is bound to, only the rows
-- its row-level security policies let it see (42501 when it may not read).
-- The processor's owning role, the table's owner and the admins may ask.  Admins, who see every processor, count every change, as
-- processor_status does (counts and times, never rows).  An implementation
-- never calls an entry point such as read(): that would check the rights of
-- the extension's owner instead.
CREATE OR REPLACE FUNCTION changefeed.lag(tbl regclass, processor text, count_limit int DEFAULT 10000)
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
    c changefeed.collection := changefeed.processor_watched(tbl, processor);
    who oid := changefeed.caller();
    l changefeed.lease;
    p record;
    tenants text[];
    whole bool := false;   -- an admin who may not read the feed counts every change
BEGIN
    BEGIN
        tenants := changefeed.require_read(tbl, who, c.tenant_column, NULL);
    EXCEPTION WHEN insufficient_privilege THEN
        IF NOT changefeed.is_admin(who) THEN
            RAISE;
        END IF;
        tenants := nullif(changefeed.tenants_of(who), '{}');
        whole := true;
    END;
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
        live := l.owner IS NOT NULL AND changefeed.holder_live(c.id, processor, l.owner);
        epoch := l.epoch;
        checkpoint_age := now() - l.updated_at;
        history_lost := false;
        BEGIN
            p := changefeed.position_decode(l.checkpoint);
            PERFORM changefeed.check_history(c, p.lo);
            BEGIN
                SELECT count(*), min(r.written_at) INTO pending, oldest_pending
                  FROM changefeed.read_windows(c.id, ARRAY[l.range_id], p.lo, p.hi, p.last_seq, count_limit,
                                               NULL, tenants, false, as_caller => NOT whole) r;
            EXCEPTION WHEN SQLSTATE 'CF021' THEN
                -- Changes logged without images (images => 'keys'): only the
                -- latest-version feed reads them, so they are counted as it
                -- delivers them, a document's latest version per window.
                SELECT count(*), min(r.written_at) INTO pending, oldest_pending
                  FROM changefeed.read_windows(c.id, ARRAY[l.range_id], p.lo, p.hi, p.last_seq, count_limit,
                                               NULL, tenants, true, as_caller => NOT whole) r;
            END;
        EXCEPTION WHEN SQLSTATE 'CF006' OR SQLSTATE 'CF019' THEN
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
CREATE OR REPLACE VIEW changefeed.horizons WITH (security_barrier) AS
SELECT c.relid AS table_name, h.collection_id, h.dropped_txid, h.dropped_before, h.dropped_at,
       h.cause, h.disabled_from
  FROM changefeed.horizon h JOIN changefeed.collection c ON c.id = h.collection_id
 WHERE pg_catalog.has_table_privilege(c.relid, 'SELECT');
