-- changefeed: the deduplication store of projector processors.
--
-- A projector processor records the event ids (read()'s event_id) of the
-- changes it applied, after applying them and before its checkpoint, and asks
-- which of a batch are recorded before applying it: a redelivered change that
-- is recorded is not applied again.  Rows live as long as the log's retention
-- of their collection (a change older than that cannot be redelivered) and go
-- with their processor.  Not dumped (no pg_extension_config_dump): in a
-- restored database the checkpoints are foreign positions, so the processors
-- rebuild (history lost, resync) under new ids and old ones would only take room.

CREATE TABLE changefeed.applied (
    collection_id int REFERENCES changefeed.collection (id) ON DELETE CASCADE,
    processor     text,
    event_id      text,
    applied_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, processor, event_id)
);

-- Checks an array of event ids: not null, no null element, at most 100000
-- (CF018, the per-call cap).
CREATE OR REPLACE FUNCTION changefeed.check_event_ids(event_ids text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF event_ids IS NULL OR array_position(event_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'event ids must not be null' USING ERRCODE = 'CF003';
    END IF;
    IF cardinality(event_ids) > 100000 THEN
        RAISE EXCEPTION 'at most 100000 event ids at a time, not %', cardinality(event_ids)
            USING ERRCODE = 'CF018', HINT = 'Split the call.';
    END IF;
END
$$;

-- Which of `event_ids` processor `processor` recorded as applied (for its
-- owner or an admin, with SELECT on the table; CF012 before lease_init()
-- claimed the name, so nobody fills a store before its processor exists).
CREATE OR REPLACE FUNCTION changefeed.dedup_applied(tbl regclass, processor text, event_ids text[])
RETURNS SETOF text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_seen(tbl, processor);
BEGIN
    PERFORM changefeed.require_select(tbl, changefeed.caller(), 'use the deduplication store of a processor on');
    PERFORM changefeed.check_event_ids(event_ids);
    RETURN QUERY
        SELECT a.event_id FROM changefeed.applied a
         WHERE a.collection_id = c.id AND a.processor = processor AND a.event_id = ANY (event_ids);
END
$$;

-- Records `event_ids` as applied by processor `processor`; returns how many
-- were new.
CREATE OR REPLACE FUNCTION changefeed.dedup_record(tbl regclass, processor text, event_ids text[])
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    n int;
BEGIN
    PERFORM changefeed.require_select(tbl, changefeed.caller(), 'use the deduplication store of a processor on');
    PERFORM changefeed.check_event_ids(event_ids);
    INSERT INTO changefeed.applied AS a (collection_id, processor, event_id)
    SELECT c.id, processor, e FROM unnest(event_ids) e
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- A maintenance step: deletes what was applied before the retention of its
-- collection at `as_of` (its change can no longer be redelivered).  Returns
-- how many rows it deleted.
CREATE OR REPLACE FUNCTION changefeed.prune_applied(as_of timestamptz) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    DELETE FROM changefeed.applied a
     USING changefeed.collection c
     WHERE c.id = a.collection_id AND a.applied_at < as_of - changefeed.effective_retention(c.retention);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
