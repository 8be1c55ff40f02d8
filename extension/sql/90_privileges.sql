-- changefeed: the SQL surface and its privileges (docs/security.md).
--
-- The functions named below are entry points.  Each one's definition above
-- becomes its SECURITY DEFINER implementation, renamed with a leading
-- underscore and executable by nobody but the extension's owner; the entry
-- point itself is a C function with the same signature that runs as its
-- caller, notes who that is (changefeed.caller()) and calls the
-- implementation (extension/caller.cpp).  So the implementations reach the
-- catalog tables, which no role may touch directly, and still check the
-- rights of the role that called.  Signatures live in one place, above, but
-- for read(): PL/pgSQL cannot name a parameter like a result column, so its
-- implementation calls `tenant` `only_tenant` and its entry point is spelled
-- out below.
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure AS fn, p.proname, p.provolatile, p.proparallel, p.proisstrict,
               pg_catalog.pg_get_function_arguments(p.oid) AS args,
               pg_catalog.pg_get_function_result(p.oid) AS result
          FROM pg_catalog.pg_proc p
         WHERE p.pronamespace = 'changefeed'::regnamespace
           AND p.proname = ANY (ARRAY[
               'enable', 'disable', 'alter', 'verify', 'read', 'read_ranges', 'lag', 'maintain',
               'lease_init', 'lease_acquire', 'lease_renew', 'lease_release', 'lease_steal',
               'lease_checkpoint', 'lease_checkpoint_many', 'lease_backfill_checkpoint', 'lease_resync', 'lease_owned',
               'reset_checkpoint', 'resync_processor', 'drop_processor', 'instance_register', 'instance_unregister', 'instances',
               'position_at', 'dedup_applied', 'dedup_record', 'bind_tenant', 'unbind_tenant', 'bound_tenants',
               'processor_status_rows', 'reserve_processor'])
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s RENAME TO %I', f.fn, '_' || f.proname);
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SECURITY DEFINER', f.fn);
        CONTINUE WHEN f.proname IN ('read', 'read_ranges');
        EXECUTE pg_catalog.format(
            'CREATE FUNCTION changefeed.%I(%s) RETURNS %s LANGUAGE c %s %s %s AS %L, %L',
            f.proname, f.args, f.result,
            CASE WHEN f.proisstrict THEN 'STRICT' ELSE '' END,
            CASE f.provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE' ELSE 'VOLATILE' END,
            CASE f.proparallel WHEN 's' THEN 'PARALLEL SAFE' WHEN 'r' THEN 'PARALLEL RESTRICTED'
                               ELSE 'PARALLEL UNSAFE' END,
            'MODULE_PATHNAME', 'changefeed_call_definer');
    END LOOP;
END
$$;

CREATE FUNCTION changefeed.read(
    tbl regclass,
    since text,
    max_changes int DEFAULT 1000,
    ranges int[] DEFAULT NULL,
    mode text DEFAULT 'all',
    filter jsonpath DEFAULT NULL,
    filter_vars jsonb DEFAULT NULL,
    doc_ids text[] DEFAULT NULL,
    tenant text DEFAULT NULL)
RETURNS TABLE (seq bigint, txid xid8, range_id int, operation text, doc_id text, partition_key text,
               current jsonb, previous jsonb, ttl_expired bool, written_at timestamptz, tenant text,
               "position" text, event_id text)
AS 'MODULE_PATHNAME', 'changefeed_call_definer' LANGUAGE c VOLATILE;

CREATE FUNCTION changefeed.read_ranges(
    tbl regclass,
    ranges int[],
    positions text[],
    max_changes int DEFAULT 1000,
    mode text DEFAULT 'all',
    tenant text DEFAULT NULL)
RETURNS TABLE (seq bigint, txid xid8, range_id int, operation text, doc_id text, partition_key text,
               current jsonb, previous jsonb, ttl_expired bool, written_at timestamptz, tenant text,
               "position" text, event_id text, resume_ranges int[])
AS 'MODULE_PATHNAME', 'changefeed_call_definer' LANGUAGE c VOLATILE;

-- Created after its entry point, which it calls (65_status.sql).
CREATE VIEW changefeed.processor_status AS
SELECT * FROM changefeed.processor_status_rows();

-- Functions that need the catalog but not the caller's identity.
ALTER FUNCTION changefeed.current_position() SECURITY DEFINER;
ALTER FUNCTION changefeed.collection_of(regclass) SECURITY DEFINER;

-- PUBLIC gets nothing: not the schema, not a function, not a table.
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA changefeed FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA changefeed FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA changefeed FROM PUBLIC;
REVOKE ALL ON SCHEMA changefeed FROM PUBLIC;

GRANT USAGE ON SCHEMA changefeed TO changefeed_reader;

-- Readers: feeds of tables they may SELECT, positions, their own lag; table
-- owners among them may enable, disable and alter their own tables.
GRANT EXECUTE ON FUNCTION
    changefeed.read(regclass, text, int, int[], text, jsonpath, jsonb, text[], text),
    changefeed.read_ranges(regclass, int[], text[], int, text, text),
    changefeed.current_position(),
    changefeed.position_at(regclass, timestamptz),
    changefeed.range_of(text, int),
    changefeed.channel_of(int),
    changefeed.collection_of(regclass),
    changefeed.lag(regclass, text, int),
    changefeed.ensure_notifier(),
    changefeed.preloaded(),
    changefeed.bound_tenants(),
    changefeed.enable(regclass, text[], int, interval, bool, text, text, bool),
    changefeed.disable(regclass, bool),
    changefeed.alter(regclass, interval, bool, text, int),
    changefeed.processor_status_rows()
    TO changefeed_reader;
GRANT SELECT ON changefeed.collections, changefeed.horizons, changefeed.processor_status TO changefeed_reader;

-- Processors: leases, checkpoints, backfill, opportunistic maintenance.
GRANT EXECUTE ON FUNCTION
    changefeed.lease_init(regclass, text, bool, timestamptz, text),
    changefeed.lease_acquire(regclass, text, text, interval),
    changefeed.lease_renew(regclass, text, text, interval),
    changefeed.lease_release(regclass, text, text, int[]),
    changefeed.lease_steal(regclass, text, int, text, text, interval),
    changefeed.lease_checkpoint(regclass, text, int, text, bigint, text),
    changefeed.lease_checkpoint_many(regclass, text, text, int[], bigint[], text[]),
    changefeed.lease_backfill_checkpoint(regclass, text, int, text, bigint, jsonb, bigint, bool),
    changefeed.lease_resync(regclass, text, int, text, bigint),
    changefeed.lease_owned(regclass, text, text),
    changefeed.reset_checkpoint(regclass, text, text, int[]),
    changefeed.resync_processor(regclass, text, int[]),
    changefeed.drop_processor(regclass, text),
    changefeed.instance_register(regclass, text, text, text),
    changefeed.instance_unregister(regclass, text, text, text),
    changefeed.instances(regclass, text),
    changefeed.dedup_applied(regclass, text, text[]),
    changefeed.dedup_record(regclass, text, text[]),
    changefeed.backfill_page(regclass, int, jsonb, int),
    changefeed.estimated_rows(regclass),
    changefeed.maintain(timestamptz)
    TO changefeed_processor;
GRANT SELECT ON changefeed.leases TO changefeed_processor;

-- Admins: every collection and processor, tenants, checks.
GRANT EXECUTE ON FUNCTION
    changefeed.verify(),
    changefeed.bind_tenant(regrole, text),
    changefeed.unbind_tenant(regrole),
    changefeed.reserve_processor(regclass, text, regrole)
    TO changefeed_admin;
GRANT SELECT ON changefeed.tenant_bindings TO changefeed_admin;
