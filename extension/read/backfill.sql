-- changefeed: backfill, the scan of a table's current rows that precedes its
-- log when a processor starts from the beginning or resyncs a range.  The
-- scan's progress is kept in the range's lease (processors/leases.sql,
-- lease_backfill_checkpoint()).

-- One keyset page of a range's current rows for a backfill: the rows whose
-- primary key is greater than `after` (a jsonb object of the key columns;
-- null = from the start), in key order.  doc_id and partition_key are
-- formatted as the capture trigger formats them: canonical text
-- (capture/identity.sql), so in any session the ids equal those it logs.
CREATE OR REPLACE FUNCTION changefeed.backfill_page(tbl regclass, range_id int, after jsonb, max_rows int DEFAULT 1000)
RETURNS TABLE (doc_id text, partition_key text, key jsonb, current jsonb)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    keys text := '';
    key_obj text := '';
    doc text;
    part text;
    rowtype text;
    col text;
    i int := 0;
    bound text[];
    tenant_cond text := 'true';
BEGIN
    IF range_id IS NULL OR range_id < 0 OR range_id >= c.ranges THEN
        RAISE EXCEPTION 'range id must be between 0 and %', c.ranges - 1 USING ERRCODE = 'CF003';
    END IF;
    IF max_rows IS NULL OR max_rows < 1 OR max_rows > 100000 THEN
        RAISE EXCEPTION 'max_rows must be between 1 and 100000, not %', coalesce(max_rows::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    IF after IS NOT NULL AND jsonb_typeof(after) <> 'object' THEN
        RAISE EXCEPTION 'after must be a jsonb object of the key columns' USING ERRCODE = 'CF003';
    END IF;
    -- This runs as the caller (SELECT on the table, its row-level security):
    -- a role bound to tenants scans only theirs.
    bound := changefeed.bound_tenants();
    IF cardinality(bound) > 0 THEN
        IF c.tenant_column IS NULL THEN
            RAISE EXCEPTION 'permission denied to read %', tbl
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'The role is bound to a tenant and the table has no tenant column.';
        END IF;
        tenant_cond := format('changefeed.canonical_text(t.%I) = ANY ($5)', c.tenant_column);
    END IF;
    rowtype := format('%s', tbl);
    FOREACH col IN ARRAY c.key_columns LOOP
        i := i + 1;
        keys := keys || CASE WHEN i > 1 THEN ', ' ELSE '' END || format('t.%I', col);
        key_obj := key_obj || CASE WHEN i > 1 THEN ', ' ELSE '' END || format('%L, t.%I', col, col);
    END LOOP;
    doc := changefeed.doc_id_sql(c.key_columns, 't');
    part := (SELECT string_agg(format('coalesce(changefeed.canonical_text(t.%I), %L)', k, ''), ' || ''/'' || ')
               FROM unnest(c.partition_key) k);
    RETURN QUERY EXECUTE format(
        'SELECT %s, %s, jsonb_build_object(%s), to_jsonb(t) FROM %s t'
        ' WHERE changefeed.range_of(%s, $1) = $2'
        '   AND ($3 IS NULL OR (%s) > (SELECT %s FROM jsonb_populate_record(NULL::%s, $3) t))'
        '   AND %s'
        ' ORDER BY %s LIMIT $4',
        doc, part, key_obj, rowtype, part, keys, keys, rowtype, tenant_cond, keys)
    USING c.ranges, range_id, after, max_rows, bound;
END
$$;

-- Estimated number of rows of a table, for backfill progress.
CREATE OR REPLACE FUNCTION changefeed.estimated_rows(tbl regclass) RETURNS bigint
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    SELECT reltuples::bigint INTO n FROM pg_class WHERE oid = tbl;
    IF n IS NULL OR n < 0 THEN
        EXECUTE format('SELECT count(*) FROM %s', tbl) INTO n;
    END IF;
    RETURN n;
END
$$;

-- Restarts a processor's ranges (all, or `range_ids`) as a backfill, for its
-- owner or an admin: the table's current rows are scanned again, then the log
-- continues from the position taken here -- what lease_resync() does from
-- inside the instance owning a range, done from outside (`changefeed resync`).
-- Every lease moved is freed with a new epoch, so running instances are
-- fenced and re-acquire it in the backfill state.  Meant for latest-version
-- processors (the table holds each document's current version); an
-- all-versions processor would receive the rows as backfill rows.  Returns how
-- many ranges restart; CF012 for a processor that never ran.
CREATE OR REPLACE FUNCTION changefeed.resync_processor(tbl regclass, processor text, range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
BEGIN
    PERFORM changefeed.check_range_ids(c, range_ids);
    RETURN changefeed.restart_leases(c, processor, range_ids, changefeed.current_position(), backfill => true);
END
$$;
