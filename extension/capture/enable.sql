-- changefeed: enabling capture on a table.
--
-- SQLSTATEs: see sqlstates.sql, the registry of every code we raise.

-- Row and TRUNCATE capture, implemented in C++ (extension/capture/capture.cpp).
-- capture_row arguments: collection id, ranges, previous images (t keep
-- them, f do not, k log keys alone: images => 'keys'),
-- replicated (t/f), number of key columns, their names, number of
-- partition-key columns, their names, tenant column name or ''.  Columns go by
-- name: a partition's clone of the trigger resolves them in the partition.
-- capture_truncate arguments: collection id, ranges, replicated (t/f).
CREATE OR REPLACE FUNCTION changefeed.capture_row() RETURNS trigger
    AS 'MODULE_PATHNAME', 'changefeed_capture_row' LANGUAGE C;
CREATE OR REPLACE FUNCTION changefeed.capture_truncate() RETURNS trigger
    AS 'MODULE_PATHNAME', 'changefeed_capture_truncate' LANGUAGE C;

-- The documented range hash: FNV-1a (32 bit) of the UTF-8 partition-key text,
-- modulo the number of ranges.  Exposed so that clients can compute it too.
CREATE OR REPLACE FUNCTION changefeed.range_of(partition_key text, ranges int) RETURNS int
    AS 'MODULE_PATHNAME', 'changefeed_range_of' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Starts this database's notifier if the library is preloaded and none runs;
-- returns whether one is running or starting.  Called by enable() and clients.
CREATE OR REPLACE FUNCTION changefeed.ensure_notifier() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_ensure_notifier' LANGUAGE C;

-- Whether the library is loaded through shared_preload_libraries (writers
-- then issue no NOTIFY; a background worker does it for them).
CREATE OR REPLACE FUNCTION changefeed.preloaded() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_preloaded' LANGUAGE C;

-- Whether the current transaction captured changes itself.
CREATE OR REPLACE FUNCTION changefeed.captured_in_this_transaction() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_captured_in_xact' LANGUAGE C;

CREATE OR REPLACE FUNCTION changefeed.channel_of(collection_id int) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
    AS $$ SELECT 'changefeed_' || collection_id::text $$;

-- Looks up an enabled table, failing with CF002 when it is not enabled or
-- disabled with its state kept.
CREATE OR REPLACE FUNCTION changefeed.collection_of(tbl regclass) RETURNS changefeed.collection
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection;
BEGIN
    PERFORM changefeed.check_table(tbl);
    SELECT * INTO c FROM changefeed.collection WHERE relid = tbl;
    IF NOT FOUND THEN
        -- enable() refuses a table without a primary key (CF001): say so first.
        RAISE EXCEPTION 'table % is not enabled for changefeed', tbl
            USING ERRCODE = 'CF002',
                  HINT = CASE WHEN EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = tbl AND i.indisprimary)
                              THEN format('Run SELECT changefeed.enable(%L);', tbl::text)
                              ELSE format('Give %s a primary key (ALTER TABLE %s ADD PRIMARY KEY (...)), then run '
                                          'SELECT changefeed.enable(%L);', tbl, tbl, tbl::text) END;
    END IF;
    IF c.disabled_at IS NOT NULL THEN
        RAISE EXCEPTION 'table % is not enabled for changefeed: it is disabled, its state kept', tbl
            USING ERRCODE = 'CF002',
                  DETAIL = format('Disabled at %s. Collection %s keeps its channel, its processors'' checkpoints and '
                                  'its logged changes; nothing is captured meanwhile.', c.disabled_at, c.id),
                  HINT = format('Run SELECT changefeed.enable(%L); to capture again (positions from before it '
                                'report history lost), or changefeed.disable(%L, forget => true) to drop the state.',
                                tbl::text, tbl::text);
    END IF;
    RETURN c;
END
$$;

-- Attribute numbers of `cols` in `tbl`, failing with CF003 for unknown columns.
CREATE OR REPLACE FUNCTION changefeed.attnums_of(tbl regclass, cols text[], what text) RETURNS int[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    col text;
    n int;
    result int[] := '{}';
BEGIN
    FOREACH col IN ARRAY cols LOOP
        SELECT attnum INTO n FROM pg_attribute
         WHERE attrelid = tbl AND attname = col AND attnum > 0 AND NOT attisdropped;
        IF NOT FOUND THEN
            RAISE EXCEPTION '% column "%" does not exist in table %', what, col, tbl
                USING ERRCODE = 'CF003';
        END IF;
        result := result || n;
    END LOOP;
    RETURN result;
END
$$;

-- Removes the capture triggers and the TRUNCATE guards of the partitions.
-- The guard (guard/guard.sql) is suspended meanwhile: it refuses that DDL from anyone else.
CREATE OR REPLACE FUNCTION changefeed.drop_triggers(tbl regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t record;
    was_suspended bool := changefeed.suspend_guard(true);
    unsafe_triggers text := changefeed.citus_triggers(tbl, true);
BEGIN
    FOR t IN SELECT g.tgname, g.tgrelid::regclass AS rel
               FROM pg_trigger g
              WHERE g.tgrelid IN (SELECT relid FROM pg_partition_tree(tbl) UNION SELECT tbl)
                AND g.tgparentid = 0
                AND (g.tgname ~ '^changefeed_capture(_truncate)?(_[0-9]+)?$'
                     OR g.tgname LIKE 'changefeed\_truncate\_guard\_%')
              ORDER BY g.tgrelid = tbl, g.tgname LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
    END LOOP;
    PERFORM changefeed.citus_triggers(tbl, false, unsafe_triggers);
    PERFORM changefeed.suspend_guard(was_suspended);
END
$$;

-- Installs the capture triggers (ENABLE ALWAYS: they also fire in replica
-- mode, where capture_row refuses or captures as the collection says; a Citus
-- distributed table's row trigger alone, which Citus copies to its shards:
-- scale_out/citus.sql), the
-- TRUNCATE guards of a partitioned table, and records the types of the
-- columns capture depends on.
CREATE OR REPLACE FUNCTION changefeed.install_triggers(c changefeed.collection) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := c.relid::regclass;
    was_suspended bool;
    unsafe_triggers text;
    part regclass;
BEGIN
    PERFORM changefeed.attnums_of(tbl, c.key_columns, 'key');
    PERFORM changefeed.attnums_of(tbl, c.partition_key, 'partition key');
    IF c.tenant_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[c.tenant_column], 'tenant');
    END IF;
    PERFORM changefeed.drop_triggers(tbl);
    was_suspended := changefeed.suspend_guard(true);
    -- Citus copies a distributed table's triggers to its shards only when asked to.
    unsafe_triggers := changefeed.citus_triggers(tbl, true);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %s '
                   'FOR EACH ROW EXECUTE FUNCTION changefeed.capture_row(%s)',
                   changefeed.capture_trigger_name(c), tbl,
                   changefeed.trigger_arguments_sql(changefeed.capture_row_arguments(c)));
    EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', tbl, changefeed.capture_trigger_name(c));
    -- A distributed table's TRUNCATE runs on its shards, captured there.
    IF c.citus IS DISTINCT FROM 'distributed' THEN
        EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %s '
                       'FOR EACH STATEMENT EXECUTE FUNCTION changefeed.capture_truncate(%s)',
                       changefeed.capture_trigger_name(c, truncate => true), tbl,
                       changefeed.trigger_arguments_sql(changefeed.capture_truncate_arguments(c)));
    END IF;
    IF c.citus IS DISTINCT FROM 'distributed' THEN
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', tbl, changefeed.capture_trigger_name(c, truncate => true));
    END IF;
    PERFORM changefeed.citus_triggers(tbl, false, unsafe_triggers);
    IF (SELECT relkind FROM pg_class WHERE oid = tbl) = 'p' THEN
        PERFORM changefeed.install_truncate_guard(c, tbl);
        FOR part IN SELECT relid FROM pg_partition_tree(tbl) WHERE relid <> tbl LOOP
            PERFORM changefeed.install_truncate_guard(c, part);
        END LOOP;
    END IF;
    PERFORM changefeed.suspend_guard(was_suspended);
    UPDATE changefeed.collection SET column_types = changefeed.column_types_of(c) WHERE id = c.id;
END
$$;

-- Starts capturing collection `c` (enable() and resume()): its triggers,
-- the coming days' partitions, made here rather than in the install script so
-- that retention may drop them (extension members cannot be dropped alone),
-- and the notifier.  Returns its id.
CREATE OR REPLACE FUNCTION changefeed.start_capture(c changefeed.collection) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM changefeed.install_triggers(c);
    IF c.citus = 'distributed' THEN
        PERFORM changefeed.learn_shards(c);
    END IF;
    -- The table's shape, a new version if it changed while capture was off.
    PERFORM changefeed.record_schema(c);
    PERFORM changefeed.create_partitions(7);
    PERFORM changefeed.ensure_notifier();
    RETURN c.id;
END
$$;

-- partition_drops: what a DROP or DETACH of a partition does (guard/guard.sql).
-- Only a partitioned table has partitions to drop.
CREATE OR REPLACE FUNCTION changefeed.check_partition_drops(tbl regclass, partition_drops text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF partition_drops IS NULL OR partition_drops NOT IN ('refuse', 'expire', 'forget') THEN
        RAISE EXCEPTION 'partition_drops must be ''refuse'', ''expire'' or ''forget'', not %',
                        coalesce(quote_literal(partition_drops), 'null')
            USING ERRCODE = 'CF003',
                  HINT = '''expire'' logs the rows of a dropped or detached partition as deletes with '
                         'ttl_expired; ''forget'' logs nothing; ''refuse'' refuses the DDL.';
    END IF;
    IF partition_drops <> 'refuse' AND (SELECT relkind FROM pg_class WHERE oid = tbl) <> 'p' THEN
        RAISE EXCEPTION 'partition_drops => % needs a partitioned table; % is not one', quote_literal(partition_drops), tbl
            USING ERRCODE = 'CF003';
    END IF;
END
$$;

-- images: 'full' logs the rows' images; 'keys' logs keys, operations and
-- positions alone, and the latest-version feed reads the current row from the
-- table when it is read (read/latest.cpp).  So 'keys' keeps no previous
-- images (keep_previous => false is required, not implied: the default true
-- would contradict it), and its table must be an ordinary one: the read
-- looks each document up in the table's primary key index.
CREATE OR REPLACE FUNCTION changefeed.check_images(tbl regclass, images text, keep_previous bool) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF images IS NULL OR images NOT IN ('full', 'keys') THEN
        RAISE EXCEPTION 'images must be ''full'' or ''keys'', not %', coalesce(quote_literal(images), 'null')
            USING ERRCODE = 'CF003',
                  HINT = '''keys'' logs keys alone: the latest-version feed reads the current rows, '
                         'the all-versions feed is not available.';
    END IF;
    IF images = 'keys' AND keep_previous THEN
        RAISE EXCEPTION 'images => ''keys'' keeps no previous images: keep_previous => true contradicts it'
            USING ERRCODE = 'CF003',
                  HINT = 'Pass keep_previous => false with images => ''keys''.';
    END IF;
    IF images = 'keys' AND (SELECT relkind FROM pg_class WHERE oid = tbl) <> 'r' THEN
        RAISE EXCEPTION 'images => ''keys'' needs an ordinary table; % is partitioned', tbl
            USING ERRCODE = 'CF003',
                  DETAIL = 'A read looks the current rows up in the table''s primary key index.';
    END IF;
END
$$;

-- Enables capture on a table and returns its collection id.  Enabling an
-- enabled table with the same options is a no-op; with other options, CF008.
-- Enabling a table disabled with its state kept resumes its collection: the
-- same id and channel, the processors' leases and checkpoints, with the
-- options given now.  Writes made while capture was off were not logged, so
-- positions from before this enable() report history lost (CF006, the
-- horizon's cause 'disabled'), unless it runs in the disabling transaction,
-- which held other writers off from the disable on (the lock of disable()
-- lasts until commit) and did not write to the table itself meanwhile.  A new key or partition key counts as a gap too: the logged
-- changes were placed in ranges by the old one.  New ranges move the logged
-- changes and checkpoints as alter() does (maintenance/ranges.sql).
CREATE OR REPLACE FUNCTION changefeed.enable(
    tbl regclass,
    partition_key text[] DEFAULT NULL,
    ranges int DEFAULT 16,
    retention interval DEFAULT '7 days',
    keep_previous bool DEFAULT true,
    tenant_column text DEFAULT NULL,
    ttl_column text DEFAULT NULL,
    replicated bool DEFAULT false,
    partition_drops text DEFAULT 'refuse',
    images text DEFAULT 'full')
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kind "char";
    resumed_id int;
    drops text := partition_drops;
    wanted_images text := images;
    keys text[];
    existing changefeed.collection;
    c changefeed.collection;
    ttl_type regtype;
    holes text[];
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'CF003';
    END IF;
    SELECT relkind INTO kind FROM pg_class WHERE oid = tbl;
    IF kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION '% is not a table', tbl
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = 'Only ordinary and partitioned tables can be enabled.';
    END IF;
    PERFORM changefeed.require_table_owner(tbl, changefeed.caller(), 'enable the change feed of');
    PERFORM changefeed.check_citus_table(tbl);
    -- Shapes whose writes could escape capture (the guard keeps them out later).
    holes := changefeed.shape_problems(tbl);
    IF cardinality(holes) > 0 THEN
        RAISE EXCEPTION 'table % cannot be enabled: writes could escape capture', tbl
            USING ERRCODE = 'CF013',
                  DETAIL = array_to_string(holes, '; ') || '.',
                  HINT = 'Enable the partitioned root of a partition tree; detach inheritance children '
                         '(ALTER TABLE ... NO INHERIT) first; make an unlogged table logged (ALTER TABLE ... '
                         'SET LOGGED).';
    END IF;
    SELECT array_agg(a.attname::text ORDER BY k.ord) INTO keys
      FROM pg_index i
      CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
     WHERE i.indrelid = tbl AND i.indisprimary;
    IF keys IS NULL THEN
        RAISE EXCEPTION 'table % has no primary key', tbl
            USING ERRCODE = 'CF001',
                  DETAIL = 'changefeed identifies documents by their primary key.',
                  HINT = 'Add a primary key, then enable the table.';
    END IF;
    PERFORM changefeed.check_ranges_count(ranges);
    PERFORM changefeed.check_retention(retention);
    IF keep_previous IS NULL THEN
        RAISE EXCEPTION 'keep_previous must not be null' USING ERRCODE = 'CF003';
    END IF;
    IF replicated IS NULL THEN
        RAISE EXCEPTION 'replicated must not be null' USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.check_partition_drops(tbl, partition_drops);
    PERFORM changefeed.check_images(tbl, images, keep_previous);
    IF partition_key IS NULL THEN
        partition_key := keys;
    ELSIF cardinality(partition_key) = 0 THEN
        RAISE EXCEPTION 'partition_key must name at least one column' USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.attnums_of(tbl, partition_key, 'partition key');
    IF tenant_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[tenant_column], 'tenant');
    END IF;
    PERFORM changefeed.check_identity_columns(tbl, keys, 'key');
    PERFORM changefeed.check_identity_columns(tbl, partition_key, 'partition key');
    IF tenant_column IS NOT NULL THEN
        PERFORM changefeed.check_identity_columns(tbl, ARRAY[tenant_column], 'tenant');
    END IF;
    IF ttl_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[ttl_column], 'ttl');
        SELECT atttypid::regtype INTO ttl_type FROM pg_attribute
         WHERE attrelid = tbl AND attname = ttl_column;
        IF ttl_type NOT IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype) THEN
            RAISE EXCEPTION 'ttl column "%" must be a timestamptz, timestamp or date, not %', ttl_column, ttl_type
                USING ERRCODE = 'CF003';
        END IF;
    END IF;

    SELECT * INTO existing FROM changefeed.collection WHERE relid = tbl;
    IF FOUND AND existing.disabled_at IS NOT NULL THEN
        -- The table, then the collection row, as disable() and alter() lock them.
        EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    END IF;
    SELECT * INTO existing FROM changefeed.collection WHERE relid = tbl FOR UPDATE;
    -- A TTL column makes the extension delete rows: only for a role that may.
    IF ttl_column IS NOT NULL AND (existing.id IS NULL OR existing.ttl_column IS DISTINCT FROM ttl_column) THEN
        PERFORM changefeed.require_delete_rows(tbl, changefeed.caller(), 'set a TTL column on');
    END IF;
    IF existing.id IS NOT NULL AND existing.disabled_at IS NOT NULL THEN
        -- Before resume() installs the triggers, which carry it.
        UPDATE changefeed.collection AS col SET images = wanted_images WHERE col.id = existing.id;
        resumed_id := changefeed.resume(existing, keys, partition_key, ranges, retention, keep_previous,
                                tenant_column, ttl_column, replicated);
        UPDATE changefeed.collection AS col SET partition_drops = drops WHERE col.id = existing.id;
        RETURN resumed_id;
    ELSIF existing.id IS NOT NULL THEN
        IF (existing.partition_key, existing.ranges, existing.retention, existing.keep_previous,
            existing.tenant_column, existing.ttl_column, existing.replicated, existing.partition_drops,
            existing.images)
           IS NOT DISTINCT FROM (partition_key, ranges, retention, keep_previous, tenant_column, ttl_column,
                                 replicated, partition_drops, images) THEN
            RETURN existing.id;
        END IF;
        RAISE EXCEPTION 'table % is already enabled with other options', tbl
            USING ERRCODE = 'CF008',
                  HINT = 'Change retention, previous images, the TTL column, the ranges or partition_drops with changefeed.alter(); '
                         'for other options, disable it (its checkpoints are kept) and enable it again.';
    END IF;

    INSERT INTO changefeed.collection AS col
           (relid, key_columns, partition_key, ranges, retention, keep_previous, tenant_column, ttl_column,
            replicated, partition_drops, images, citus)
    VALUES (tbl, keys, partition_key, ranges, retention, keep_previous, tenant_column, ttl_column, replicated,
            partition_drops, images,
            CASE WHEN changefeed.citus_table_kind(tbl) IS NOT NULL THEN 'distributed' END)
    RETURNING * INTO c;
    RETURN changefeed.start_capture(c);
END
$$;

-- What the current transaction has written to `tbl` and its partitions so
-- far: rows inserted, updated and deleted (the statistics counters of this
-- transaction, subtransactions rolled back included), the tables' files
-- (a TRUNCATE or a rewrite gives a new one) and the columns' types (a type
-- change that reinterprets values may skip the rewrite: int4 to oid).  NULL
-- when the counters are off.
CREATE OR REPLACE FUNCTION changefeed.write_marks(tbl regclass) RETURNS jsonb
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN current_setting('track_counts')::bool THEN
        jsonb_build_object(
            'rows', sum(pg_stat_get_xact_tuples_inserted(t.relid) + pg_stat_get_xact_tuples_updated(t.relid)
                        + pg_stat_get_xact_tuples_deleted(t.relid)),
            'files', jsonb_agg(pg_relation_filenode(t.relid) ORDER BY t.relid),
            'columns', (SELECT jsonb_agg(jsonb_build_array(a.attnum, a.atttypid, a.atttypmod) ORDER BY a.attnum)
                          FROM pg_attribute a WHERE a.attrelid = tbl AND a.attnum > 0))
        END
      FROM (SELECT relid FROM pg_partition_tree(tbl) UNION SELECT tbl) t
$$;

-- Resumes capture of `existing`, a collection disabled with its state kept,
-- with the options given (validated by enable()).  Returns its id.
CREATE OR REPLACE FUNCTION changefeed.resume(existing changefeed.collection, keys text[], partition_key text[], ranges int,
                                             retention interval, keep_previous bool, tenant_column text, ttl_column text,
                                             replicated bool)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection;
    -- No other writer could write uncaptured between a disable() and an
    -- enable() of one transaction, and this one did not if its marks did not
    -- move; after a restore, now() tells the row's old transaction id from
    -- this one's.
    same_xact bool := existing.disabled_txid IS NOT DISTINCT FROM pg_current_xact_id()
                      AND existing.disabled_at = now()
                      AND existing.disabled_marks IS NOT DISTINCT FROM changefeed.write_marks(existing.relid)
                      AND existing.disabled_marks IS NOT NULL;
BEGIN
    IF NOT same_xact OR existing.key_columns IS DISTINCT FROM keys
       OR existing.partition_key IS DISTINCT FROM partition_key THEN
        PERFORM changefeed.raise_horizon(existing.id, pg_current_xact_id(), now(), 'disabled', existing.disabled_at);
    END IF;
    UPDATE changefeed.collection AS col
       SET key_columns = keys, partition_key = resume.partition_key, retention = resume.retention,
           keep_previous = resume.keep_previous, tenant_column = resume.tenant_column,
           ttl_column = resume.ttl_column, replicated = resume.replicated,
           enabled_at = now(), disabled_at = NULL, disabled_txid = NULL, disabled_marks = NULL
     WHERE col.id = existing.id
    RETURNING * INTO c;
    IF c.ranges <> ranges THEN
        c := changefeed.change_ranges(c, ranges);
    END IF;
    RETURN changefeed.start_capture(c);
END
$$;

-- Removes capture from a table.  By default the collection stays, disabled:
-- its id and channel, its processors (names, leases, checkpoints,
-- deduplication records) and its logged changes are kept for enable() to
-- resume; reads and lease calls fail with CF002 meanwhile, and the leases'
-- epochs move on, so running instances are fenced.  `forget` drops all of it
-- (the logged changes stay until retention drops them).  The table lock
-- taken here keeps writers off until the transaction ends.
CREATE OR REPLACE FUNCTION changefeed.disable(tbl regclass, forget bool DEFAULT false) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection;
BEGIN
    PERFORM changefeed.check_table(tbl);
    IF forget IS NULL THEN
        RAISE EXCEPTION 'forget must not be null' USING ERRCODE = 'CF003';
    END IF;
    SELECT * INTO c FROM changefeed.collection WHERE relid = tbl;
    IF NOT FOUND THEN
        PERFORM changefeed.collection_of(tbl);   -- CF002
    END IF;
    PERFORM changefeed.require_table_owner(tbl, changefeed.caller(), 'disable the change feed of');
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    SELECT * INTO c FROM changefeed.collection WHERE id = c.id FOR UPDATE;
    IF forget THEN
        PERFORM changefeed.drop_triggers(tbl);
        DELETE FROM changefeed.collection WHERE id = c.id;
        DELETE FROM changefeed.schema_version WHERE collection_id = c.id;
    ELSIF c.disabled_at IS NULL THEN
        PERFORM changefeed.drop_triggers(tbl);
        UPDATE changefeed.collection
           SET disabled_at = now(), disabled_txid = pg_current_xact_id(), disabled_marks = changefeed.write_marks(tbl)
         WHERE id = c.id;
        UPDATE changefeed.processor SET lease_generation = lease_generation + 1 WHERE collection_id = c.id;
        UPDATE changefeed.lease SET owner = NULL, epoch = epoch + 1, updated_at = now()
         WHERE collection_id = c.id;
    END IF;
END
$$;

-- Lists the collections whose tables the querying role may SELECT.
CREATE OR REPLACE VIEW changefeed.collections WITH (security_barrier) AS
SELECT c.id,
       c.relid::regclass AS table_name,
       c.key_columns,
       c.partition_key,
       c.ranges,
       c.retention,
       c.keep_previous,
       c.tenant_column,
       c.ttl_column,
       changefeed.channel_of(c.id) AS channel,
       c.enabled_at,
       c.replicated,
       c.disabled_at IS NULL AS enabled,   -- false: disabled, its state kept
       c.disabled_at,
       c.partition_drops,
       c.images
  FROM changefeed.collection c
 WHERE pg_catalog.has_table_privilege(c.relid, 'SELECT');

-- Dropping an enabled table, or one disabled with its state kept, forgets its
-- collection (and its leases); its log rows stay until retention drops them.
-- SECURITY DEFINER: it runs on every role's DROP.
CREATE OR REPLACE FUNCTION changefeed.forget_dropped() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    WITH gone AS (
        DELETE FROM changefeed.collection c
         USING pg_event_trigger_dropped_objects() d
         WHERE d.classid = 'pg_class'::regclass AND d.objid = c.relid::oid AND d.objsubid = 0
           AND NOT d.is_temporary
        RETURNING c.id, c.citus),
    placement AS (
        -- A shard placement Citus dropped: its log is read to its end still.
        UPDATE changefeed.shard_placement p SET dropped_at = now()
          FROM gone WHERE p.collection_id = gone.id AND p.dropped_at IS NULL)
    DELETE FROM changefeed.schema_version s USING gone
     WHERE s.collection_id = gone.id AND gone.citus IS DISTINCT FROM 'shard';
END
$$;
CREATE EVENT TRIGGER changefeed_forget_dropped ON sql_drop
    WHEN TAG IN ('DROP TABLE', 'DROP SCHEMA', 'DROP OWNED')
    EXECUTE FUNCTION changefeed.forget_dropped();
-- Replica mode (session_replication_role) must not leave a dropped table enabled.
ALTER EVENT TRIGGER changefeed_forget_dropped ENABLE ALWAYS;
