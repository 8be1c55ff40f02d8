-- changefeed: upgrade from release 0.2 to 0.3.
--
-- Every schema change of 0.3 made in extension/sql/ is repeated here, so that
-- an upgraded database ends with the same objects as a fresh install
-- (test/upgrade.sh compares the two).

-- ---- positions taken inside a writing transaction ----
-- current_position() and position_at() count our own transaction as in
-- progress, so a position taken in the transaction that writes the first
-- changes (lease_init() with them, say) delivers those changes once they
-- commit (30_read.sql).
CREATE FUNCTION changefeed.snapshot_now() RETURNS pg_snapshot
AS 'MODULE_PATHNAME', 'changefeed_snapshot_now' LANGUAGE C STABLE PARALLEL RESTRICTED;
REVOKE ALL ON FUNCTION changefeed.snapshot_now() FROM PUBLIC;

CREATE OR REPLACE FUNCTION changefeed.current_position() RETURNS text
LANGUAGE sql STABLE PARALLEL RESTRICTED SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT changefeed.position_encode(changefeed.snapshot_now(), NULL, 0)
$$;

-- ---- the wake-up path ----
-- PL/pgSQL, not SQL: every read asks, and a session plans this once instead
-- of once per statement.
CREATE OR REPLACE FUNCTION changefeed.tenants_of(who oid) RETURNS text[]
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT coalesce(array_agg(DISTINCT b.tenant ORDER BY b.tenant), '{}')
              FROM changefeed.tenant_binding b
             WHERE NOT (SELECT rolsuper FROM pg_roles WHERE oid = who)
               AND EXISTS (SELECT 1 FROM pg_roles WHERE oid = b.role_id)
               AND pg_has_role(who, b.role_id, 'USAGE'));
END
$$;

-- ---- disable() keeps, ranges change ----
-- disable() keeps the collection (its id, channel, processors' leases and
-- checkpoints, deduplication records, logged changes) unless forget => true;
-- enable() resumes it; a gap in capture is recorded in the horizon (cause
-- 'disabled') and reported as history lost.  The ranges of a live collection
-- change with alter(..., ranges => n) (55_ranges.sql).
ALTER TABLE changefeed.collection ADD COLUMN disabled_at timestamptz, ADD COLUMN disabled_txid xid8,
                                   ADD COLUMN disabled_marks jsonb;
ALTER TABLE changefeed.horizon ADD COLUMN cause text NOT NULL DEFAULT 'retention',
                               ADD COLUMN disabled_from timestamptz;

DROP FUNCTION changefeed.raise_horizon(int, xid8, timestamptz);
CREATE FUNCTION changefeed.write_marks(tbl regclass) RETURNS jsonb
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN current_setting('track_counts')::bool THEN
        jsonb_build_object(
            'rows', sum(pg_stat_get_xact_tuples_inserted(t.relid) + pg_stat_get_xact_tuples_updated(t.relid)
                        + pg_stat_get_xact_tuples_deleted(t.relid)),
            'files', jsonb_agg(pg_relation_filenode(t.relid) ORDER BY t.relid))
        END
      FROM (SELECT relid FROM pg_partition_tree(tbl) UNION SELECT tbl) t
$$;

CREATE FUNCTION changefeed.raise_horizon(collection_id int, upto xid8, written_before timestamptz,
                                         cause text DEFAULT 'retention', disabled_from timestamptz DEFAULT NULL)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO changefeed.horizon AS h (collection_id, dropped_txid, dropped_before, cause, disabled_from)
    VALUES (collection_id, upto, written_before, cause, disabled_from)
    ON CONFLICT (collection_id) DO UPDATE
       SET dropped_txid = greatest(h.dropped_txid, excluded.dropped_txid),
           dropped_before = greatest(h.dropped_before, excluded.dropped_before),
           dropped_at = now(),
           cause = CASE WHEN excluded.dropped_txid >= h.dropped_txid THEN excluded.cause ELSE h.cause END,
           disabled_from = CASE WHEN excluded.dropped_txid >= h.dropped_txid THEN excluded.disabled_from
                                ELSE h.disabled_from END
$$;

CREATE OR REPLACE FUNCTION changefeed.check_history(c changefeed.collection, lo pg_snapshot) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    h changefeed.horizon;
BEGIN
    SELECT * INTO h FROM changefeed.horizon WHERE collection_id = c.id;
    IF FOUND AND NOT changefeed.snapshot_covers(lo, h.dropped_txid) THEN
        IF h.cause = 'disabled' THEN
            RAISE EXCEPTION 'history lost for %: capture was disabled after this position', c.relid::regclass
                USING ERRCODE = 'CF006',
                      DETAIL = format('Capture of %s was off from %s until %s (transaction %s); writes of that time were not logged.',
                                      c.relid::regclass, h.disabled_from, h.dropped_before, h.dropped_txid),
                      HINT = 'The feed cannot resume from this position. Rebuild the consumer from the table '
                             '(see docs/runbooks/history-lost.md), then continue from a new position.';
        END IF;
        RAISE EXCEPTION 'history lost for %: retention dropped changes that this position had not read',
                        c.relid::regclass
            USING ERRCODE = 'CF006',
                  DETAIL = format('Changes up to transaction %s, written before %s, were dropped at %s; the retention of %s is %s.',
                                  h.dropped_txid, h.dropped_before, h.dropped_at, c.relid::regclass, c.retention),
                  HINT = 'The feed cannot resume from this position. Rebuild the consumer from the table '
                         '(see docs/runbooks/history-lost.md), then continue from a new position.';
    END IF;
END
$$;

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
            USING ERRCODE = 'CF006',
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

CREATE OR REPLACE FUNCTION changefeed.collection_of(tbl regclass) RETURNS changefeed.collection
LANGUAGE plpgsql SECURITY DEFINER STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'CF002';
    END IF;
    SELECT * INTO c FROM changefeed.collection WHERE relid = tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % is not enabled for changefeed', tbl
            USING ERRCODE = 'CF002',
                  HINT = format('Run SELECT changefeed.enable(%L);', tbl::text);
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

CREATE OR REPLACE FUNCTION changefeed._enable(
    tbl regclass,
    partition_key text[] DEFAULT NULL,
    ranges int DEFAULT 16,
    retention interval DEFAULT '7 days',
    keep_previous bool DEFAULT true,
    tenant_column text DEFAULT NULL,
    ttl_column text DEFAULT NULL,
    replicated bool DEFAULT false)
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kind "char";
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
    -- Shapes whose writes could escape capture (the guard keeps them out later).
    holes := changefeed.shape_problems(tbl);
    IF cardinality(holes) > 0 THEN
        RAISE EXCEPTION 'table % cannot be enabled: writes could escape capture', tbl
            USING ERRCODE = 'CF013',
                  DETAIL = array_to_string(holes, '; ') || '.',
                  HINT = 'Enable the partitioned root of a partition tree; detach inheritance children '
                         '(ALTER TABLE ... NO INHERIT) first.';
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
    IF ranges IS NULL OR ranges < 1 OR ranges > 4096 THEN
        RAISE EXCEPTION 'ranges must be between 1 and 4096, not %', coalesce(ranges::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    IF retention IS NULL OR retention <= interval '0' THEN
        RAISE EXCEPTION 'retention must be a positive interval, not %', coalesce(retention::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    IF keep_previous IS NULL THEN
        RAISE EXCEPTION 'keep_previous must not be null' USING ERRCODE = 'CF003';
    END IF;
    IF replicated IS NULL THEN
        RAISE EXCEPTION 'replicated must not be null' USING ERRCODE = 'CF003';
    END IF;
    IF partition_key IS NULL THEN
        partition_key := keys;
    ELSIF cardinality(partition_key) = 0 THEN
        RAISE EXCEPTION 'partition_key must name at least one column' USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.attnums_of(tbl, partition_key, 'partition key');
    IF tenant_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[tenant_column], 'tenant');
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
    IF FOUND AND existing.disabled_at IS NOT NULL THEN
        RETURN changefeed.resume(existing, keys, partition_key, ranges, retention, keep_previous,
                                 tenant_column, ttl_column, replicated);
    ELSIF FOUND THEN
        IF (existing.partition_key, existing.ranges, existing.retention, existing.keep_previous,
            existing.tenant_column, existing.ttl_column, existing.replicated)
           IS NOT DISTINCT FROM (partition_key, ranges, retention, keep_previous, tenant_column, ttl_column,
                                 replicated) THEN
            RETURN existing.id;
        END IF;
        RAISE EXCEPTION 'table % is already enabled with other options', tbl
            USING ERRCODE = 'CF008',
                  HINT = 'Change retention, previous images, the TTL column or the ranges with changefeed.alter(); '
                         'for other options, disable it (its checkpoints are kept) and enable it again.';
    END IF;

    INSERT INTO changefeed.collection AS col
           (relid, key_columns, partition_key, ranges, retention, keep_previous, tenant_column, ttl_column,
            replicated)
    VALUES (tbl, keys, partition_key, ranges, retention, keep_previous, tenant_column, ttl_column, replicated)
    RETURNING * INTO c;
    PERFORM changefeed.install_triggers(c);
    -- Partitions are made here rather than in the install script, so that
    -- retention may drop them (extension members cannot be dropped alone).
    PERFORM changefeed.create_partitions(7);
    PERFORM changefeed.ensure_notifier();
    RETURN c.id;
END
$$;

CREATE FUNCTION changefeed.resume(existing changefeed.collection, keys text[], partition_key text[], ranges int,
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
    PERFORM changefeed.install_triggers(c);
    PERFORM changefeed.create_partitions(7);
    PERFORM changefeed.ensure_notifier();
    RETURN c.id;
END
$$;

CREATE OR REPLACE FUNCTION changefeed.enabled_above(rel oid) RETURNS SETOF changefeed.collection
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE up(oid) AS (
        SELECT rel
        UNION
        SELECT i.inhparent FROM pg_catalog.pg_inherits i JOIN up ON i.inhrelid = up.oid)
    SELECT c.* FROM changefeed.collection c
     WHERE c.relid IN (SELECT oid FROM up) AND c.disabled_at IS NULL ORDER BY c.id
$$;

CREATE OR REPLACE FUNCTION changefeed.shape_problems(tbl oid) RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(p ORDER BY n, p), '{}') FROM (
        SELECT 1, format('%s is a partition of %s', i.inhrelid::regclass, i.inhparent::regclass)
          FROM pg_inherits i JOIN pg_class r ON r.oid = i.inhrelid
         WHERE i.inhrelid = tbl AND r.relispartition
        UNION ALL
        SELECT 2, format('%s inherits from %s', i.inhrelid::regclass, i.inhparent::regclass)
          FROM pg_inherits i JOIN pg_class r ON r.oid = i.inhrelid
         WHERE (i.inhrelid = tbl OR i.inhparent IN (SELECT changefeed.tree_of(tbl))) AND NOT r.relispartition
        UNION ALL
        SELECT 3, format('partition %s is a foreign table', r.oid::regclass)
          FROM pg_class r WHERE r.oid IN (SELECT changefeed.tree_of(tbl)) AND r.relkind = 'f'
        UNION ALL
        SELECT 4, format('partition %s is enabled itself (collection %s)', c.relid::regclass, c.id)
          FROM changefeed.collection c
         WHERE c.relid IN (SELECT changefeed.tree_of(tbl)) AND c.relid <> tbl AND c.disabled_at IS NULL
    ) problems(n, p)
$$;

CREATE OR REPLACE FUNCTION changefeed.guard_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d record;
    rel oid;
    c changefeed.collection;
    guard_id int;
    problems text[];
BEGIN
    -- A dropped capture trigger or TRUNCATE guard may have been the last one.
    IF changefeed.guard_suspended()
       OR (NOT changefeed.any_capture_trigger()
           AND NOT EXISTS (SELECT 1 FROM pg_event_trigger_dropped_objects()
                            WHERE object_type = 'trigger' AND address_names[3] LIKE 'changefeed\_%')) THEN
        RETURN;
    END IF;
    FOR d IN SELECT * FROM pg_event_trigger_dropped_objects()
              WHERE NOT is_temporary AND object_type IN ('trigger', 'table constraint', 'table column')
                AND cardinality(address_names) = 3 LOOP
        -- The table still exists unless the command dropped it too.
        rel := to_regclass(format('%I.%I', d.address_names[1], d.address_names[2]));
        IF d.object_type = 'trigger' AND d.address_names[3] LIKE 'changefeed\_truncate\_guard\_%' THEN
            guard_id := substr(d.address_names[3], length('changefeed_truncate_guard_') + 1)::int;
            SELECT * INTO c FROM changefeed.collection x
             WHERE x.id = guard_id AND EXISTS (SELECT 1 FROM pg_class r WHERE r.oid = x.relid);
            IF FOUND THEN
                PERFORM changefeed.refuse_hole(tg_tag, c, ARRAY[CASE WHEN rel IS NULL
                    THEN format('partition %I.%I would be dropped', d.address_names[1], d.address_names[2])
                    ELSE format('trigger %s would be dropped', d.object_identity) END]);
            END IF;
        ELSIF d.object_type = 'trigger' AND rel IS NOT NULL
              AND d.address_names[3] IN ('changefeed_capture', 'changefeed_capture_truncate') THEN
            FOR c IN SELECT * FROM changefeed.enabled_above(rel) LOOP
                PERFORM changefeed.refuse_hole(tg_tag, c, ARRAY[format('trigger %s would be dropped', d.object_identity)]);
            END LOOP;
        ELSIF d.object_type IN ('table constraint', 'table column') AND rel IS NOT NULL THEN
            FOR c IN SELECT * FROM changefeed.collection x WHERE x.relid = rel AND x.disabled_at IS NULL LOOP
                problems := changefeed.capture_problems(c, complete => false);
                IF NOT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = rel AND indisprimary) THEN
                    problems := problems || 'the primary key would be dropped'::text;
                END IF;
                IF cardinality(problems) > 0 THEN
                    PERFORM changefeed.refuse_hole(tg_tag, c, problems);
                END IF;
            END LOOP;
        END IF;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._verify()
RETURNS TABLE (table_name regclass, collection_id int, intact bool, problems text[])
LANGUAGE sql SECURITY DEFINER STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT c.relid::regclass, c.id, cardinality(p) = 0, p
      FROM changefeed.collection c, LATERAL changefeed.capture_problems(c, true) p
     WHERE c.disabled_at IS NULL
     ORDER BY c.id
$$;

CREATE OR REPLACE FUNCTION changefeed.expire(as_of timestamptz DEFAULT now()) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection;
    total bigint := 0;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    FOR c IN SELECT * FROM changefeed.collection WHERE ttl_column IS NOT NULL AND disabled_at IS NULL ORDER BY id LOOP
        total := total + changefeed.expire_rows(c.id, as_of);
    END LOOP;
    RETURN total;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._maintain(as_of timestamptz DEFAULT now(),
    OUT partitions_created int, OUT partitions_dropped int, OUT ttl_deleted bigint,
    OUT failed_steps text[])
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '1s'   -- replaced below; the clause keeps the change inside this call
AS $$
DECLARE
    c record;
    p record;
    step text;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    -- Acting as if it were another time drops or expires early: admins only.
    IF as_of <> now() THEN
        PERFORM changefeed.require_admin(changefeed.caller(), 'run maintenance as of another time');
    END IF;
    partitions_created := 0; partitions_dropped := 0; ttl_deleted := 0; failed_steps := '{}';
    PERFORM set_config('lock_timeout',
                       coalesce(nullif(current_setting('changefeed.maintenance_lock_timeout', true), ''), '1s'),
                       true);
    -- One maintenance at a time.  A step of the maintenance worker is short:
    -- wait for it; another maintain() still running after the lock timeout
    -- does the same work, so this one returns without doing anything.
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('changefeed.maintain'));
    EXCEPTION WHEN lock_not_available THEN
        RETURN;
    END;

    FOR c IN SELECT id, relid FROM changefeed.collection WHERE ttl_column IS NOT NULL AND disabled_at IS NULL
              ORDER BY id LOOP
        step := format('expire %s', c.relid::regclass);
        BEGIN
            ttl_deleted := ttl_deleted + changefeed.expire_rows(c.id, as_of);
        EXCEPTION WHEN OTHERS THEN
            failed_steps := failed_steps || step;
            PERFORM changefeed.warn_step_failed(step, SQLSTATE, SQLERRM);
        END;
    END LOOP;

    FOR p IN SELECT * FROM changefeed.expired_partitions(as_of) LOOP
        step := format('drop %s', p.part);
        BEGIN
            PERFORM changefeed.prune_partition(p.part, as_of);
            partitions_dropped := partitions_dropped + 1;
        EXCEPTION WHEN OTHERS THEN
            failed_steps := failed_steps || step;
            PERFORM changefeed.warn_step_failed(step, SQLSTATE, SQLERRM);
        END;
    END LOOP;

    step := 'prune default partition';
    BEGIN
        PERFORM changefeed.prune_default(as_of);
    EXCEPTION WHEN OTHERS THEN
        failed_steps := failed_steps || step;
        PERFORM changefeed.warn_step_failed(step, SQLSTATE, SQLERRM);
    END;

    step := 'create partitions';
    BEGIN
        partitions_created := changefeed.create_partitions(7, as_of);
    EXCEPTION WHEN OTHERS THEN
        failed_steps := failed_steps || step;
        PERFORM changefeed.warn_step_failed(step, SQLSTATE, SQLERRM);
    END;

    step := 'prune ticks';
    BEGIN
        PERFORM changefeed.prune_ticks(as_of);
    EXCEPTION WHEN OTHERS THEN
        failed_steps := failed_steps || step;
        PERFORM changefeed.warn_step_failed(step, SQLSTATE, SQLERRM);
    END;

    step := 'prune applied';
    BEGIN
        PERFORM changefeed.prune_applied(as_of);
    EXCEPTION WHEN OTHERS THEN
        failed_steps := failed_steps || step;
        PERFORM changefeed.warn_step_failed(step, SQLSTATE, SQLERRM);
    END;
END
$$;

CREATE FUNCTION changefeed.oldest_position(positions text[]) RETURNS text
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

CREATE FUNCTION changefeed.change_ranges(c changefeed.collection, n int) RETURNS changefeed.collection
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
    IF n IS NULL OR n < 1 OR n > 4096 THEN
        RAISE EXCEPTION 'ranges must be between 1 and 4096, not %', coalesce(n::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    -- Writers wait from here to commit (and those in progress finish first):
    -- no row is logged under either layout meanwhile.  The table first, then
    -- the collection row, as disable() and enable() lock them.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', c.relid::regclass);
    SELECT * INTO c FROM changefeed.collection x WHERE x.id = c.id FOR UPDATE;
    old := c.ranges;
    IF n = old THEN
        RETURN c;
    END IF;
    -- Leases in the order lease writers lock them.
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
            l.expires_at := NULL;
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

DROP FUNCTION changefeed.disable(regclass);
DROP FUNCTION changefeed._disable(regclass);
CREATE FUNCTION changefeed._disable(tbl regclass, forget bool DEFAULT false) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'CF002';
    END IF;
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
    ELSIF c.disabled_at IS NULL THEN
        PERFORM changefeed.drop_triggers(tbl);
        UPDATE changefeed.collection
           SET disabled_at = now(), disabled_txid = pg_current_xact_id(), disabled_marks = changefeed.write_marks(tbl)
         WHERE id = c.id;
        UPDATE changefeed.lease SET owner = NULL, expires_at = NULL, epoch = epoch + 1, updated_at = now()
         WHERE collection_id = c.id;
    END IF;
END
$$;
CREATE FUNCTION changefeed.disable(tbl regclass, forget boolean DEFAULT false) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'changefeed_call_definer';

DROP FUNCTION changefeed.alter(regclass, interval, bool, text);
DROP FUNCTION changefeed._alter(regclass, interval, bool, text);
CREATE FUNCTION changefeed._alter(tbl regclass, retention interval DEFAULT NULL,
                                 keep_previous bool DEFAULT NULL, ttl_column text DEFAULT NULL,
                                 ranges int DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.require_table_owner(tbl, changefeed.caller(), 'alter the change feed of');
    -- The table, then the collection row (as disable() locks them): a
    -- concurrent disable() is seen here, not undone by the triggers below.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    PERFORM 1 FROM changefeed.collection x WHERE x.id = c.id FOR UPDATE;
    c := changefeed.collection_of(tbl);
    IF retention IS NOT NULL AND retention <= interval '0' THEN
        RAISE EXCEPTION 'retention must be a positive interval, not %', retention USING ERRCODE = 'CF003';
    END IF;
    IF ranges IS NOT NULL AND (ranges < 1 OR ranges > 4096) THEN
        RAISE EXCEPTION 'ranges must be between 1 and 4096, not %', ranges USING ERRCODE = 'CF003';
    END IF;
    IF ttl_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[ttl_column], 'ttl');
        IF (SELECT atttypid FROM pg_attribute WHERE attrelid = tbl AND attname = ttl_column)
           NOT IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype) THEN
            RAISE EXCEPTION 'ttl column "%" must be a timestamptz, timestamp or date', ttl_column
                USING ERRCODE = 'CF003';
        END IF;
    END IF;
    IF ranges IS NOT NULL AND ranges <> c.ranges THEN
        c := changefeed.change_ranges(c, ranges);
    END IF;
    UPDATE changefeed.collection AS col
       SET retention = coalesce($2, col.retention),        -- retention
           keep_previous = coalesce($3, col.keep_previous),  -- keep_previous
           ttl_column = coalesce($4, col.ttl_column)         -- ttl_column
     WHERE id = c.id
    RETURNING * INTO c;
    PERFORM changefeed.install_triggers(c);
END
$$;
CREATE FUNCTION changefeed.alter(tbl regclass, retention interval DEFAULT NULL::interval,
                                 keep_previous boolean DEFAULT NULL::boolean, ttl_column text DEFAULT NULL::text,
                                 ranges integer DEFAULT NULL::integer) RETURNS void
    LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'changefeed_call_definer';

REVOKE ALL ON FUNCTION changefeed.raise_horizon(int, xid8, timestamptz, text, timestamptz),
                       changefeed.write_marks(regclass),
                       changefeed.resume(changefeed.collection, text[], text[], int, interval, bool, text, text, bool),
                       changefeed.oldest_position(text[]),
                       changefeed.change_ranges(changefeed.collection, int),
                       changefeed._disable(regclass, bool),
                       changefeed.disable(regclass, bool),
                       changefeed._alter(regclass, interval, bool, text, int),
                       changefeed.alter(regclass, interval, bool, text, int)
       FROM PUBLIC;
GRANT EXECUTE ON FUNCTION changefeed.disable(regclass, bool),
                          changefeed.alter(regclass, interval, bool, text, int)
       TO changefeed_reader;

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
       c.disabled_at
  FROM changefeed.collection c
 WHERE pg_catalog.has_table_privilege(c.relid, 'SELECT');
CREATE OR REPLACE VIEW changefeed.horizons WITH (security_barrier) AS
SELECT c.relid AS table_name, h.collection_id, h.dropped_txid, h.dropped_before, h.dropped_at,
       h.cause, h.disabled_from
  FROM changefeed.horizon h JOIN changefeed.collection c ON c.id = h.collection_id
 WHERE pg_catalog.has_table_privilege(c.relid, 'SELECT');

-- ---- read path: read() and read_ranges() ----
-- One window per page, the 'all' mode without window functions, JIT off, and
-- read_ranges() passing rows through (read() leaves where it stopped in
-- changefeed.read_position).  The implementations behind the entry points
-- (90_privileges.sql renames them _read, _read_ranges and makes them SECURITY
-- DEFINER; CREATE OR REPLACE keeps owner and privileges but not that
-- attribute, so it is spelled out here).
-- read() in C (extension/read_window.cpp) without a jsonpath filter, what
-- processors read: from the position (lo, hi, last_seq), the windows and
-- their pages, the same rows read() returns in mode 'all' or, with `latest`,
-- mode 'latest'; and the backlog estimate that chooses a window's shape, for
-- read()'s SQL statement (jsonpath filters).
CREATE FUNCTION changefeed.read_windows(collection_id int, ranges int[], lo pg_snapshot, hi pg_snapshot,
                                        after bigint, max_changes int, doc_ids text[], tenants text[],
                                        latest bool)
RETURNS TABLE (seq bigint, txid xid8, range_id int, operation text, doc_id text, partition_key text,
               current jsonb, previous jsonb, ttl_expired bool, written_at timestamptz, tenant text,
               "position" text, event_id text)
AS 'MODULE_PATHNAME', 'changefeed_read_windows' LANGUAGE C VOLATILE;

CREATE FUNCTION changefeed.window_backlog(collection_id int, ranges int[], lo pg_snapshot, upto pg_snapshot,
                                          stop_at int) RETURNS int
AS 'MODULE_PATHNAME', 'changefeed_window_backlog' LANGUAGE C STABLE;
REVOKE ALL ON FUNCTION changefeed.read_windows(int, int[], pg_snapshot, pg_snapshot, bigint, int, text[], text[], bool),
                       changefeed.window_backlog(int, int[], pg_snapshot, pg_snapshot, int) FROM PUBLIC;

CREATE OR REPLACE FUNCTION changefeed._read(
    tbl regclass,
    since text,
    max_changes int DEFAULT 1000,
    ranges int[] DEFAULT NULL,
    mode text DEFAULT 'all',
    filter jsonpath DEFAULT NULL,
    filter_vars jsonb DEFAULT NULL,
    doc_ids text[] DEFAULT NULL,
    only_tenant text DEFAULT NULL)   -- `tenant` in the entry point (90_privileges.sql)
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
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET plan_cache_mode = force_generic_plan SET work_mem = '64MB' AS $$
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
    IF mode IS NULL OR mode NOT IN ('all', 'latest') THEN
        RAISE EXCEPTION 'mode must be ''all'' or ''latest'', not %', coalesce(quote_literal(mode), 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_changes IS NULL OR max_changes < 1 OR max_changes > 100000 THEN
        RAISE EXCEPTION 'max_changes must be between 1 and 100000, not %', coalesce(max_changes::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
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
                USING ERRCODE = 'invalid_parameter_value';
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
            current_snap := pg_current_snapshot();
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
                SELECT w.* FROM (
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
                 WHERE mode = 'all'
                   AND (doc_ids IS NULL OR w.op = 't' OR w.doc_id = ANY (doc_ids))
                   AND (tenants IS NULL OR w.op = 't' OR w.tenant = ANY (tenants))
                   AND (filter IS NULL OR changefeed.filter_matches(w.op, w.current, w.previous, filter, filter_vars))
                 ORDER BY w.seq
                 LIMIT remaining + 1) a
            UNION ALL
            -- 'latest': per document the window's last version, unless a
            -- delete or a later clear of its range ends it.
            SELECT b.* FROM (
                SELECT v.* FROM (
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
                 WHERE v.op <> 'd' AND v.seq > after
                   AND (cl.seq IS NULL OR v.seq > cl.seq)
                   AND (doc_ids IS NULL OR v.doc_id = ANY (doc_ids))
                   AND (tenants IS NULL OR v.tenant = ANY (tenants))
                   AND (filter IS NULL OR changefeed.filter_matches(v.op, v.current, v.previous, filter, filter_vars))
                 ORDER BY v.seq
                 LIMIT remaining + 1) b
        ),
        bounds AS (SELECT count(*) AS total, max(pg.seq) AS top FROM page pg),
        ends AS MATERIALIZED (SELECT b.total, b.top,
                        CASE WHEN b.total <= remaining THEN b.top
                             ELSE (SELECT max(pg.seq) FROM page pg WHERE pg.seq < b.top) END AS last
                   FROM bounds b)
        SELECT k.seq, k.txid, k.range_id,
               CASE k.op WHEN 'c' THEN 'create' WHEN 'r' THEN 'replace'
                         WHEN 'd' THEN 'delete' WHEN 't' THEN 'clear' END,
               k.doc_id, k.partition_key,
               k.current, k.previous, k.ttl_expired, k.written_at, k.tenant,
               CASE WHEN k.seq <> e.last THEN changefeed.position_encode(lo, hi, k.seq)
                    -- The page's last row: read_ranges() learns where it stopped.
                    ELSE pg_catalog.set_config('changefeed.read_position',
                             CASE WHEN e.total <= remaining
                                  THEN changefeed.position_encode(hi, NULL, 0)   -- window exhausted
                                  ELSE changefeed.position_encode(lo, hi, k.seq) END, true) END,
               c.id::text || '.' || k.txid::text || '.' || k.seq::text
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

-- read_ranges() in C (extension/read_window.cpp): read_ranges_plan() checks
-- the call and plans the groups, C reads them straight into the result.
CREATE OR REPLACE FUNCTION changefeed._read_ranges(
    tbl regclass,
    ranges int[],
    positions text[],
    max_changes int DEFAULT 1000,
    mode text DEFAULT 'all',
    only_tenant text DEFAULT NULL)
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
    resume_ranges int[])
LANGUAGE c VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET work_mem = '64MB'
AS 'MODULE_PATHNAME', 'changefeed_read_ranges';

CREATE FUNCTION changefeed.read_ranges_plan(
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
    IF mode IS NULL OR mode NOT IN ('all', 'latest') THEN
        RAISE EXCEPTION 'mode must be ''all'' or ''latest'', not %', coalesce(quote_literal(mode), 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_changes IS NULL OR max_changes < 1 OR max_changes > 100000 THEN
        RAISE EXCEPTION 'max_changes must be between 1 and 100000, not %', coalesce(max_changes::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
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
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF distinct_ranges <> coalesce(array_length(ranges, 1), 0) THEN
        RAISE EXCEPTION 'a range id must not be given twice' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(positions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'position must not be null' USING ERRCODE = 'CF004',
              HINT = 'Start from changefeed.current_position(), or from a position a previous read returned.';
    END IF;
    collection_id := c.id;
    FOR g IN
        SELECT q.pos, q.rs, d.lo, d.hi, d.last_seq, pg_snapshot_xmax(coalesce(d.hi, d.lo)) AS upto,
               CASE WHEN h.dropped_txid IS NULL THEN true
                    ELSE changefeed.snapshot_covers(d.lo, h.dropped_txid) END AS covered
          FROM (SELECT p.pos, array_agg(p.r ORDER BY p.r) AS rs
                  FROM unnest(ranges, positions) AS p(r, pos) GROUP BY p.pos) q
          CROSS JOIN LATERAL changefeed.position_decode(q.pos) d
          LEFT JOIN changefeed.horizon h ON h.collection_id = c.id
         ORDER BY pg_snapshot_xmax(d.lo), d.hi IS NOT NULL, pg_snapshot_xmax(d.hi), d.last_seq, q.pos
    LOOP
        IF NOT g.covered THEN
            PERFORM changefeed.check_history(c, g.lo);   -- raises CF006, saying why
        END IF;
        pos := g.pos; rs := g.rs; lo := g.lo; hi := g.hi; last_seq := g.last_seq; upto := g.upto;
        RETURN NEXT;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION changefeed.read_ranges_plan(regclass, int[], text[], int, text, text) FROM PUBLIC;

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

-- Monitoring: changefeed.processor_status (65_status.sql), with its entry
-- point as 90_privileges.sql makes it.
CREATE FUNCTION changefeed.processor_status_rows()
RETURNS TABLE (
    table_name regclass,
    collection_id int,
    processor text,
    range_id int,
    owner_role regrole,
    instance text,
    live bool,
    epoch bigint,
    expires_at timestamptz,
    checkpoint_age interval,
    backfill_done bool,
    pending_estimate bigint,
    pending_exact bool,
    lag_seconds float8,
    history_lost bool)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    status_count_limit constant int := 1000;
    who oid := changefeed.caller();
    sees_all bool := changefeed.is_admin(who) OR pg_has_role(who, 'pg_monitor', 'USAGE');
    bound text[] := changefeed.tenants_of(who);
    c changefeed.collection;
    h changefeed.horizon;
    l record;
    pos record;
    counts bool;
    lo_xmax xid8;
    lo_xip xid8[];
    n bigint;
    oldest timestamptz;
BEGIN
    FOR c IN SELECT * FROM changefeed.collection x ORDER BY x.id LOOP
        -- Counting changes is reading the feed's volume: as read() allows it
        -- (changefeed.require_read), or for those who see every processor.
        counts := sees_all
               OR (has_table_privilege(who, c.relid, 'SELECT')
                   AND (NOT (SELECT k.relrowsecurity FROM pg_class k WHERE k.oid = c.relid)
                        OR (SELECT r.rolsuper OR r.rolbypassrls FROM pg_roles r WHERE r.oid = who)
                        OR pg_has_role(who, (SELECT k.relowner FROM pg_class k WHERE k.oid = c.relid), 'USAGE'))
                   AND (cardinality(bound) = 0 OR c.tenant_column IS NOT NULL));
        SELECT * INTO h FROM changefeed.horizon x WHERE x.collection_id = c.id;
        FOR l IN
            SELECT x.processor, x.range_id, x.owner, x.epoch, x.expires_at, x.updated_at, x.checkpoint,
                   x.backfill_done, p.owner_role
              FROM changefeed.lease x
              LEFT JOIN changefeed.processor p ON p.collection_id = x.collection_id AND p.name = x.processor
             WHERE x.collection_id = c.id
               AND (sees_all OR (p.owner_role IS NOT NULL
                                 AND EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = p.owner_role)
                                 AND pg_has_role(who, p.owner_role, 'USAGE')))
             ORDER BY x.processor, x.range_id
        LOOP
            table_name := c.relid::regclass;
            collection_id := c.id;
            processor := l.processor;
            range_id := l.range_id;
            owner_role := l.owner_role;
            instance := l.owner;
            live := l.owner IS NOT NULL AND l.expires_at > now();
            epoch := l.epoch;
            expires_at := l.expires_at;
            checkpoint_age := now() - l.updated_at;
            backfill_done := l.backfill_done;
            pending_estimate := NULL;
            pending_exact := NULL;
            lag_seconds := NULL;
            history_lost := NULL;
            IF counts THEN
                BEGIN
                    pos := changefeed.position_decode(l.checkpoint);
                    history_lost := h.collection_id IS NOT NULL
                                    AND NOT changefeed.snapshot_covers(pos.lo, h.dropped_txid);
                EXCEPTION WHEN SQLSTATE 'CF004' OR SQLSTATE 'CF005' THEN
                    -- Damaged, or of another database (a restore): the
                    -- processor treats it as a lost history too.
                    history_lost := true;
                END;
                IF NOT history_lost THEN
                    lo_xmax := pg_snapshot_xmax(pos.lo);
                    lo_xip := ARRAY(SELECT pg_snapshot_xip(pos.lo));
                    -- Not visible in lo, minus what a window being paged
                    -- delivered already (visible in hi, seq up to last_seq).
                    SELECT count(*), min(u.written_at) INTO n, oldest FROM (
                        (SELECT g.written_at FROM changefeed.log g
                          WHERE g.collection_id = c.id AND g.range_id = l.range_id AND g.txid >= lo_xmax
                            AND (cardinality(bound) = 0 OR g.tenant = ANY (bound))
                            AND NOT (pos.hi IS NOT NULL AND pg_visible_in_snapshot(g.txid, pos.hi)
                                     AND g.seq <= pos.last_seq)
                          ORDER BY g.txid LIMIT status_count_limit + 1)
                        UNION ALL
                        (SELECT g.written_at FROM changefeed.log g
                          WHERE g.collection_id = c.id AND g.range_id = l.range_id AND g.txid = ANY (lo_xip)
                            AND (cardinality(bound) = 0 OR g.tenant = ANY (bound))
                            AND NOT (pos.hi IS NOT NULL AND pg_visible_in_snapshot(g.txid, pos.hi)
                                     AND g.seq <= pos.last_seq)
                          LIMIT status_count_limit + 1)) u;
                    pending_exact := n <= status_count_limit;
                    pending_estimate := least(n, status_count_limit);
                    lag_seconds := CASE WHEN oldest IS NULL THEN 0
                                        ELSE greatest(extract(epoch FROM now() - oldest)::float8, 0) END;
                END IF;
            END IF;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END
$$;
ALTER FUNCTION changefeed.processor_status_rows() RENAME TO _processor_status_rows;
ALTER FUNCTION changefeed._processor_status_rows() SECURITY DEFINER;
CREATE FUNCTION changefeed.processor_status_rows()
RETURNS TABLE (table_name regclass, collection_id int, processor text, range_id int, owner_role regrole,
               instance text, live bool, epoch bigint, expires_at timestamptz, checkpoint_age interval,
               backfill_done bool, pending_estimate bigint, pending_exact bool, lag_seconds float8,
               history_lost bool)
AS 'MODULE_PATHNAME', 'changefeed_call_definer' LANGUAGE c STABLE PARALLEL UNSAFE;
CREATE VIEW changefeed.processor_status AS
SELECT * FROM changefeed.processor_status_rows();
REVOKE ALL ON FUNCTION changefeed._processor_status_rows() FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.processor_status_rows() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION changefeed.processor_status_rows() TO changefeed_reader;
GRANT SELECT ON changefeed.processor_status TO changefeed_reader;

-- ---- the position key in the database ----
-- 0.2 kept the key in the data directory (changefeed_position.key, made on
-- first use): a standby made before that had none, or made its own.  The
-- key moves into the database; an existing file's key is taken over, so
-- positions stored under 0.2 stay valid.
CREATE FUNCTION changefeed._new_position_key() RETURNS bytea
AS 'MODULE_PATHNAME', 'changefeed_new_position_key' LANGUAGE c VOLATILE STRICT;
REVOKE ALL ON FUNCTION changefeed._new_position_key() FROM PUBLIC;
CREATE TABLE changefeed.position_key (
    key     bytea NOT NULL CHECK (length(key) = 32),
    one_row bool NOT NULL DEFAULT true PRIMARY KEY CHECK (one_row)
);
REVOKE ALL ON changefeed.position_key FROM PUBLIC;
DO $$
DECLARE
    file_key bytea := pg_catalog.pg_read_binary_file('changefeed_position.key', 0, 64, true);
BEGIN
    IF file_key IS NOT NULL AND pg_catalog.length(file_key) <> 32 THEN
        RAISE EXCEPTION 'position key file "changefeed_position.key" holds % bytes instead of 32',
            pg_catalog.length(file_key)
            USING HINT = 'Restore the file from a backup of this cluster before the update.';
    END IF;
    INSERT INTO changefeed.position_key (key) VALUES (coalesce(file_key, changefeed._new_position_key()));
END
$$;

-- ---- positions know their history ----
-- Positions now carry the timeline and WAL position they were taken at, so
-- two positions of one snapshot may differ in text: read_ranges_plan()
-- groups ranges by what their positions hold.
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
    IF mode IS NULL OR mode NOT IN ('all', 'latest') THEN
        RAISE EXCEPTION 'mode must be ''all'' or ''latest'', not %', coalesce(quote_literal(mode), 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_changes IS NULL OR max_changes < 1 OR max_changes > 100000 THEN
        RAISE EXCEPTION 'max_changes must be between 1 and 100000, not %', coalesce(max_changes::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
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
            USING ERRCODE = 'invalid_parameter_value';
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

-- ---- tenants: bindings that hold, moves, lag with the caller's rights ----
-- A binding holds for the session user too, so SET ROLE cannot widen a bound
-- login; bound roles hold a grant that makes DROP ROLE refuse them, and DROP
-- OWNED is refused while they are bound (15_access.sql).  A row that moves
-- between tenants is logged as op 'm' with the tenant it left, a delete for
-- that tenant and a create for the new one (30_read.sql, 65_status.sql).
-- lag() counts with its caller's rights (60_lag.sql).
ALTER TABLE changefeed.log ADD COLUMN previous_tenant text;

CREATE OR REPLACE FUNCTION changefeed.tenants_of(who oid) RETURNS text[]
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN (SELECT coalesce(array_agg(DISTINCT b.tenant ORDER BY b.tenant), '{}')
              FROM changefeed.tenant_binding b
             WHERE EXISTS (SELECT 1 FROM pg_roles WHERE oid = b.role_id)
               AND EXISTS (SELECT 1 FROM pg_roles m
                            WHERE (m.oid = who OR m.rolname = session_user) AND NOT m.rolsuper
                              AND pg_has_role(m.oid, b.role_id, 'MEMBER')));
END
$$;

-- Held by every bound role: EXECUTE on this function, granted by
-- bind_tenant(), is a shared dependency of the role, so DROP ROLE refuses a
-- bound role in any database of the cluster (naming this function) until
-- unbind_tenant() revokes it.  No binding outlives its role, and a new role
-- that gets a dead one's OID inherits nothing.  Calling it does nothing.
CREATE FUNCTION changefeed.tenant_binding_held() RETURNS void
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$ $$;

-- Whether role `who` holds the grant above itself (not through a membership).
CREATE FUNCTION changefeed.holds_binding_grant(who oid) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_proc p, aclexplode(p.proacl) a
                    WHERE p.oid = 'changefeed.tenant_binding_held()'::regprocedure
                      AND a.grantee = who AND a.privilege_type = 'EXECUTE')
$$;

CREATE OR REPLACE FUNCTION changefeed._bind_tenant(who regrole, tenant text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM changefeed.require_admin(changefeed.caller(), 'bind roles to tenants');
    IF who IS NULL OR tenant IS NULL OR tenant = '' THEN
        RAISE EXCEPTION 'role and tenant must be given' USING ERRCODE = 'CF003';
    END IF;
    IF (SELECT rolsuper FROM pg_roles WHERE oid = who) THEN
        RAISE EXCEPTION 'superuser % cannot be bound to a tenant', who USING ERRCODE = 'CF003';
    END IF;
    INSERT INTO changefeed.tenant_binding AS b (role_id, tenant) VALUES (who, tenant)
    ON CONFLICT (role_id) DO UPDATE SET tenant = excluded.tenant;
    EXECUTE format('GRANT EXECUTE ON FUNCTION changefeed.tenant_binding_held() TO %s', who);
END
$$;

CREATE OR REPLACE FUNCTION changefeed._unbind_tenant(who regrole) RETURNS bool
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM changefeed.require_admin(changefeed.caller(), 'unbind roles from tenants');
    DELETE FROM changefeed.tenant_binding WHERE role_id = who;
    IF FOUND THEN
        EXECUTE format('REVOKE EXECUTE ON FUNCTION changefeed.tenant_binding_held() FROM %s', who);
        RETURN true;
    END IF;
    RETURN false;
END
$$;

-- DROP OWNED BY a bound role revokes the grant that keeps DROP ROLE from
-- leaving its binding behind, and any member of the role may run it (the
-- role itself too): the grant of every bound role is given back, with a
-- warning.  So DROP ROLE still refuses it until unbind_tenant().  Never an
-- error: a DROP OWNED of other roles is never stopped by a binding.
CREATE FUNCTION changefeed.keep_bindings() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    b changefeed.tenant_binding;
BEGIN
    FOR b IN SELECT * FROM changefeed.tenant_binding x
              WHERE EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = x.role_id)
                AND NOT changefeed.holds_binding_grant(x.role_id)
              ORDER BY x.role_id::text LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION changefeed.tenant_binding_held() TO %s', b.role_id);
        RAISE WARNING 'role % stays bound to tenant %, and cannot be dropped until it is unbound', b.role_id,
                      quote_literal(b.tenant)
            USING HINT = format('SELECT changefeed.unbind_tenant(%L); then DROP OWNED and DROP ROLE.',
                                b.role_id::text);
    END LOOP;
END
$$;
CREATE EVENT TRIGGER changefeed_keep_bindings ON ddl_command_end
    WHEN TAG IN ('DROP OWNED')
    EXECUTE FUNCTION changefeed.keep_bindings();
ALTER EVENT TRIGGER changefeed_keep_bindings ENABLE ALWAYS;

REVOKE ALL ON FUNCTION changefeed.tenant_binding_held(), changefeed.holds_binding_grant(oid),
                       changefeed.keep_bindings() FROM PUBLIC;
-- Bindings of roles dropped before this version go; the others hold the grant.
DELETE FROM changefeed.tenant_binding b WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = b.role_id);
DO $$
DECLARE
    r regrole;
BEGIN
    FOR r IN SELECT role_id FROM changefeed.tenant_binding LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION changefeed.tenant_binding_held() TO %s', r);
    END LOOP;
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
CREATE FUNCTION changefeed.op_seen(op "char", tenant text, previous_tenant text, tenants text[]) RETURNS "char"
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN tenants IS NULL THEN CASE WHEN op = 'm' THEN 'r'::"char" ELSE op END
        WHEN op = 't' THEN op
        WHEN op <> 'm' THEN CASE WHEN tenant = ANY (tenants) THEN op END
        WHEN tenant = ANY (tenants) THEN CASE WHEN previous_tenant = ANY (tenants) THEN 'r'::"char" ELSE 'c'::"char" END
        WHEN previous_tenant = ANY (tenants) THEN 'd'::"char"
    END
$$;

REVOKE ALL ON FUNCTION changefeed.op_seen("char", text, text, text[]) FROM PUBLIC;

CREATE OR REPLACE FUNCTION changefeed._read(
    tbl regclass,
    since text,
    max_changes int DEFAULT 1000,
    ranges int[] DEFAULT NULL,
    mode text DEFAULT 'all',
    filter jsonpath DEFAULT NULL,
    filter_vars jsonb DEFAULT NULL,
    doc_ids text[] DEFAULT NULL,
    only_tenant text DEFAULT NULL)   -- `tenant` in the entry point (90_privileges.sql)
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
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET plan_cache_mode = force_generic_plan SET work_mem = '64MB' AS $$
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
    IF mode IS NULL OR mode NOT IN ('all', 'latest') THEN
        RAISE EXCEPTION 'mode must be ''all'' or ''latest'', not %', coalesce(quote_literal(mode), 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_changes IS NULL OR max_changes < 1 OR max_changes > 100000 THEN
        RAISE EXCEPTION 'max_changes must be between 1 and 100000, not %', coalesce(max_changes::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
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
                USING ERRCODE = 'invalid_parameter_value';
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
            current_snap := pg_current_snapshot();
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
                    -- The page's last row: read_ranges() learns where it stopped.
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

CREATE OR REPLACE FUNCTION changefeed._lag(tbl regclass, processor text, count_limit int DEFAULT 10000)
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
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    who oid := changefeed.caller();
    l changefeed.lease;
    p record;
    tenants text[];
BEGIN
    BEGIN
        tenants := changefeed.require_read(tbl, who, c.tenant_column, NULL);
    EXCEPTION WHEN insufficient_privilege THEN
        IF NOT changefeed.is_admin(who) THEN
            RAISE;
        END IF;
        tenants := nullif(changefeed.tenants_of(who), '{}');
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
        live := l.owner IS NOT NULL AND l.expires_at > now();
        epoch := l.epoch;
        checkpoint_age := now() - l.updated_at;
        history_lost := false;
        BEGIN
            p := changefeed.position_decode(l.checkpoint);
            PERFORM changefeed.check_history(c, p.lo);
            SELECT count(*), min(r.written_at) INTO pending, oldest_pending
              FROM changefeed.read_windows(c.id, ARRAY[l.range_id], p.lo, p.hi, p.last_seq, count_limit,
                                           NULL, tenants, false) r;
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

CREATE OR REPLACE FUNCTION changefeed._processor_status_rows()
RETURNS TABLE (
    table_name regclass,
    collection_id int,
    processor text,
    range_id int,
    owner_role regrole,
    instance text,
    live bool,
    epoch bigint,
    expires_at timestamptz,
    checkpoint_age interval,
    backfill_done bool,
    pending_estimate bigint,
    pending_exact bool,
    lag_seconds float8,
    history_lost bool)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    status_count_limit constant int := 1000;
    who oid := changefeed.caller();
    sees_all bool := changefeed.is_admin(who) OR pg_has_role(who, 'pg_monitor', 'USAGE');
    bound text[] := changefeed.tenants_of(who);
    c changefeed.collection;
    h changefeed.horizon;
    l record;
    pos record;
    counts bool;
    lo_xmax xid8;
    lo_xip xid8[];
    n bigint;
    oldest timestamptz;
BEGIN
    FOR c IN SELECT * FROM changefeed.collection x ORDER BY x.id LOOP
        -- Counting changes is reading the feed's volume: as read() allows it
        -- (changefeed.require_read), or for those who see every processor.
        counts := sees_all
               OR (has_table_privilege(who, c.relid, 'SELECT')
                   AND (NOT (SELECT k.relrowsecurity FROM pg_class k WHERE k.oid = c.relid)
                        OR (SELECT r.rolsuper OR r.rolbypassrls FROM pg_roles r WHERE r.oid = who)
                        OR pg_has_role(who, (SELECT k.relowner FROM pg_class k WHERE k.oid = c.relid), 'USAGE'))
                   AND (cardinality(bound) = 0 OR c.tenant_column IS NOT NULL));
        SELECT * INTO h FROM changefeed.horizon x WHERE x.collection_id = c.id;
        FOR l IN
            SELECT x.processor, x.range_id, x.owner, x.epoch, x.expires_at, x.updated_at, x.checkpoint,
                   x.backfill_done, p.owner_role
              FROM changefeed.lease x
              LEFT JOIN changefeed.processor p ON p.collection_id = x.collection_id AND p.name = x.processor
             WHERE x.collection_id = c.id
               AND (sees_all OR (p.owner_role IS NOT NULL
                                 AND EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = p.owner_role)
                                 AND pg_has_role(who, p.owner_role, 'USAGE')))
             ORDER BY x.processor, x.range_id
        LOOP
            table_name := c.relid::regclass;
            collection_id := c.id;
            processor := l.processor;
            range_id := l.range_id;
            owner_role := l.owner_role;
            instance := l.owner;
            live := l.owner IS NOT NULL AND l.expires_at > now();
            epoch := l.epoch;
            expires_at := l.expires_at;
            checkpoint_age := now() - l.updated_at;
            backfill_done := l.backfill_done;
            pending_estimate := NULL;
            pending_exact := NULL;
            lag_seconds := NULL;
            history_lost := NULL;
            IF counts THEN
                BEGIN
                    pos := changefeed.position_decode(l.checkpoint);
                    history_lost := h.collection_id IS NOT NULL
                                    AND NOT changefeed.snapshot_covers(pos.lo, h.dropped_txid);
                EXCEPTION WHEN SQLSTATE 'CF004' OR SQLSTATE 'CF005' THEN
                    -- Damaged, or of another database (a restore): the
                    -- processor treats it as a lost history too.
                    history_lost := true;
                END;
                IF NOT history_lost THEN
                    lo_xmax := pg_snapshot_xmax(pos.lo);
                    lo_xip := ARRAY(SELECT pg_snapshot_xip(pos.lo));
                    -- Not visible in lo, minus what a window being paged
                    -- delivered already (visible in hi, seq up to last_seq).
                    SELECT count(*), min(u.written_at) INTO n, oldest FROM (
                        (SELECT g.written_at FROM changefeed.log g
                          WHERE g.collection_id = c.id AND g.range_id = l.range_id AND g.txid >= lo_xmax
                            AND (cardinality(bound) = 0 OR g.tenant = ANY (bound) OR g.previous_tenant = ANY (bound))
                            AND NOT (pos.hi IS NOT NULL AND pg_visible_in_snapshot(g.txid, pos.hi)
                                     AND g.seq <= pos.last_seq)
                          ORDER BY g.txid LIMIT status_count_limit + 1)
                        UNION ALL
                        (SELECT g.written_at FROM changefeed.log g
                          WHERE g.collection_id = c.id AND g.range_id = l.range_id AND g.txid = ANY (lo_xip)
                            AND (cardinality(bound) = 0 OR g.tenant = ANY (bound) OR g.previous_tenant = ANY (bound))
                            AND NOT (pos.hi IS NOT NULL AND pg_visible_in_snapshot(g.txid, pos.hi)
                                     AND g.seq <= pos.last_seq)
                          LIMIT status_count_limit + 1)) u;
                    pending_exact := n <= status_count_limit;
                    pending_estimate := least(n, status_count_limit);
                    lag_seconds := CASE WHEN oldest IS NULL THEN 0
                                        ELSE greatest(extract(epoch FROM now() - oldest)::float8, 0) END;
                END IF;
            END IF;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END
$$;

-- ---- trust: admin powers bounded, processor names claimed first, retention and maintenance bounded ----
-- A TTL column needs the table's owner or DELETE on it; lease, instance,
-- checkpoint and deduplication calls need a processor its role claimed
-- (lease_init) and SELECT on the table; admins reserve names
-- (reserve_processor); per-processor caps (CF018); retention bounded by
-- changefeed.max_retention and cut off per collection; each maintenance step
-- bounded by changefeed.maintenance_statement_timeout in a block of its own.

CREATE OR REPLACE FUNCTION changefeed.require_processor(tbl regclass, collection_id int, name text, who oid,
                                             claim bool DEFAULT false) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    owner oid;
BEGIN
    SELECT p.owner_role INTO owner FROM changefeed.processor p
     WHERE p.collection_id = collection_id AND p.name = name;
    IF NOT FOUND THEN
        IF NOT claim THEN
            -- Nothing is filed under a name before lease_init() claimed it:
            -- else a stranger could fill a processor's deduplication store or
            -- register phantom instances under it before its owner starts.
            RAISE EXCEPTION 'processor "%" has never run on %', name, tbl
                USING ERRCODE = 'CF012',
                      DETAIL = 'Leases, instances, checkpoints and deduplication records are filed only under a '
                               'processor name that changefeed.lease_init() claimed for its role.',
                      HINT = 'Start the processor first (the client calls lease_init() in start()).';
        END IF;
        INSERT INTO changefeed.processor AS p (collection_id, name, owner_role)
        VALUES (collection_id, name, who::regrole)
        ON CONFLICT ON CONSTRAINT processor_pkey DO NOTHING;
        SELECT p.owner_role INTO owner FROM changefeed.processor p
         WHERE p.collection_id = collection_id AND p.name = name;
    END IF;
    IF changefeed.is_admin(who)
       OR (EXISTS (SELECT 1 FROM pg_roles WHERE oid = owner) AND pg_has_role(who, owner, 'USAGE')) THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'processor "%" on % belongs to role %', name, tbl, changefeed.role_name(owner)
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('%s may not take its leases, move its checkpoints or see its lag.',
                              changefeed.role_name(who)),
              HINT = 'Run the processor as its owning role, choose another processor name, or ask a changefeed_admin.';
END
$$;

CREATE FUNCTION changefeed.require_select(tbl regclass, who oid, action text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT has_table_privilege(who, tbl, 'SELECT') THEN
        RAISE EXCEPTION 'permission denied to % %', action, tbl
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('That needs SELECT on %s; %s does not have it.', tbl, changefeed.role_name(who));
    END IF;
END
$$;

CREATE FUNCTION changefeed.may_delete_rows(tbl regclass, who oid) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_has_role(who, (SELECT relowner FROM pg_class WHERE oid = tbl), 'USAGE')
        OR has_table_privilege(who, tbl, 'DELETE')
$$;

CREATE FUNCTION changefeed.require_delete_rows(tbl regclass, who oid, action text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT changefeed.may_delete_rows(tbl, who) THEN
        RAISE EXCEPTION 'permission denied to % %', action, tbl
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('That makes the extension delete rows of %s; %s is not its owner and has no DELETE on it.',
                                  tbl, changefeed.role_name(who)),
                  HINT = 'Ask the table owner, or GRANT DELETE on the table to the role.';
    END IF;
END
$$;

CREATE FUNCTION changefeed.processor_leaving(tbl regclass, processor text, instance text)
RETURNS changefeed.collection
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.check_name(processor, 'processor');
    PERFORM changefeed.check_name(instance, 'instance');
    PERFORM changefeed.require_processor(tbl, c.id, processor, changefeed.caller());
    RETURN c;
END
$$;

CREATE OR REPLACE FUNCTION changefeed.processor_of(tbl regclass, processor text, instance text)
RETURNS changefeed.collection
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.processor_leaving(tbl, processor, instance);
BEGIN
    PERFORM changefeed.require_select(tbl, changefeed.caller(), 'run a processor on');
    RETURN c;
END
$$;

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

CREATE FUNCTION changefeed.max_retention() RETURNS interval
    AS 'MODULE_PATHNAME', 'changefeed_max_retention_interval' LANGUAGE C STABLE PARALLEL SAFE;

CREATE FUNCTION changefeed.check_retention(retention interval) RETURNS interval
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF retention IS NULL OR retention <= interval '0' THEN
        RAISE EXCEPTION 'retention must be a positive interval, not %', coalesce(retention::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    BEGIN
        PERFORM now() - retention;
    EXCEPTION WHEN datetime_field_overflow OR interval_field_overflow THEN
        RAISE EXCEPTION 'retention % is out of range', retention
            USING ERRCODE = 'CF003', HINT = format('At most changefeed.max_retention (%s).', changefeed.max_retention());
    END;
    IF retention > changefeed.max_retention() THEN
        RAISE EXCEPTION 'retention must be at most %, not %', changefeed.max_retention(), retention
            USING ERRCODE = 'CF003',
                  DETAIL = 'The log is shared: the longest retention keeps it for every collection.',
                  HINT = 'The server''s administrator sets the limit (changefeed.max_retention).';
    END IF;
    RETURN retention;
END
$$;

CREATE FUNCTION changefeed.effective_retention(retention interval) RETURNS interval
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT least(retention, changefeed.max_retention())
$$;

CREATE OR REPLACE FUNCTION changefeed.retention_cutoff(as_of timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT as_of - changefeed.effective_retention(
        coalesce((SELECT max(retention) FROM changefeed.collection), interval '7 days'))
$$;

CREATE FUNCTION changefeed.expire_history(collection_id int, as_of timestamptz) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection;
    cutoff timestamptz;
    newest xid8;
    m xid8;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    SELECT * INTO c FROM changefeed.collection x WHERE x.id = collection_id;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    cutoff := as_of - changefeed.effective_retention(c.retention);
    FOR r IN 0 .. c.ranges - 1 LOOP
        SELECT l.txid INTO m FROM changefeed.log l
         WHERE l.collection_id = c.id AND l.range_id = r AND l.written_at < cutoff
         ORDER BY l.txid DESC LIMIT 1;
        IF FOUND AND (newest IS NULL OR m > newest) THEN newest := m; END IF;
    END LOOP;
    IF newest IS NULL
       OR EXISTS (SELECT 1 FROM changefeed.horizon h WHERE h.collection_id = c.id AND h.dropped_txid >= newest) THEN
        RETURN 0;
    END IF;
    PERFORM changefeed.raise_horizon(c.id, newest, cutoff);
    RETURN 1;
END
$$;

CREATE FUNCTION changefeed.step_timeout_begin() RETURNS void
    AS 'MODULE_PATHNAME', 'changefeed_step_timeout_begin' LANGUAGE C VOLATILE;

CREATE FUNCTION changefeed.step_timeout_end() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_step_timeout_end' LANGUAGE C VOLATILE;

CREATE FUNCTION changefeed.run_step(step text, query text, as_of timestamptz, id bigint,
                                    INOUT failed_steps text[], OUT value bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    value := 0;
    BEGIN
        PERFORM changefeed.step_timeout_begin();
        EXECUTE query INTO value USING as_of, id;
        PERFORM changefeed.step_timeout_end();
    EXCEPTION
        WHEN query_canceled THEN
            IF NOT changefeed.step_timeout_end() THEN
                RAISE;
            END IF;
            value := 0;
            failed_steps := failed_steps || step;
            PERFORM changefeed.warn_step_failed(step, SQLSTATE,
                format('%s (changefeed.maintenance_statement_timeout is %s)', SQLERRM,
                       current_setting('changefeed.maintenance_statement_timeout')));
        WHEN OTHERS THEN
            PERFORM changefeed.step_timeout_end();
            value := 0;
            failed_steps := failed_steps || step;
            PERFORM changefeed.warn_step_failed(step, SQLSTATE, SQLERRM);
    END;
    value := coalesce(value, 0);
END
$$;

CREATE FUNCTION changefeed.expire_step(collection_id int, as_of timestamptz) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF as_of > now() THEN
        PERFORM changefeed.require_delete_rows(
            (SELECT c.relid FROM changefeed.collection c WHERE c.id = expire_step.collection_id),
            changefeed.caller(), 'expire rows early of');
    END IF;
    RETURN changefeed.expire_rows(collection_id, as_of);
END
$$;

CREATE OR REPLACE FUNCTION changefeed._enable(
    tbl regclass,
    partition_key text[] DEFAULT NULL,
    ranges int DEFAULT 16,
    retention interval DEFAULT '7 days',
    keep_previous bool DEFAULT true,
    tenant_column text DEFAULT NULL,
    ttl_column text DEFAULT NULL,
    replicated bool DEFAULT false)
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kind "char";
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
    -- Shapes whose writes could escape capture (the guard keeps them out later).
    holes := changefeed.shape_problems(tbl);
    IF cardinality(holes) > 0 THEN
        RAISE EXCEPTION 'table % cannot be enabled: writes could escape capture', tbl
            USING ERRCODE = 'CF013',
                  DETAIL = array_to_string(holes, '; ') || '.',
                  HINT = 'Enable the partitioned root of a partition tree; detach inheritance children '
                         '(ALTER TABLE ... NO INHERIT) first.';
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
    IF ranges IS NULL OR ranges < 1 OR ranges > 4096 THEN
        RAISE EXCEPTION 'ranges must be between 1 and 4096, not %', coalesce(ranges::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.check_retention(retention);
    IF keep_previous IS NULL THEN
        RAISE EXCEPTION 'keep_previous must not be null' USING ERRCODE = 'CF003';
    END IF;
    IF replicated IS NULL THEN
        RAISE EXCEPTION 'replicated must not be null' USING ERRCODE = 'CF003';
    END IF;
    IF partition_key IS NULL THEN
        partition_key := keys;
    ELSIF cardinality(partition_key) = 0 THEN
        RAISE EXCEPTION 'partition_key must name at least one column' USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.attnums_of(tbl, partition_key, 'partition key');
    IF tenant_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[tenant_column], 'tenant');
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
        RETURN changefeed.resume(existing, keys, partition_key, ranges, retention, keep_previous,
                                 tenant_column, ttl_column, replicated);
    ELSIF existing.id IS NOT NULL THEN
        IF (existing.partition_key, existing.ranges, existing.retention, existing.keep_previous,
            existing.tenant_column, existing.ttl_column, existing.replicated)
           IS NOT DISTINCT FROM (partition_key, ranges, retention, keep_previous, tenant_column, ttl_column,
                                 replicated) THEN
            RETURN existing.id;
        END IF;
        RAISE EXCEPTION 'table % is already enabled with other options', tbl
            USING ERRCODE = 'CF008',
                  HINT = 'Change retention, previous images, the TTL column or the ranges with changefeed.alter(); '
                         'for other options, disable it (its checkpoints are kept) and enable it again.';
    END IF;

    INSERT INTO changefeed.collection AS col
           (relid, key_columns, partition_key, ranges, retention, keep_previous, tenant_column, ttl_column,
            replicated)
    VALUES (tbl, keys, partition_key, ranges, retention, keep_previous, tenant_column, ttl_column, replicated)
    RETURNING * INTO c;
    PERFORM changefeed.install_triggers(c);
    -- Partitions are made here rather than in the install script, so that
    -- retention may drop them (extension members cannot be dropped alone).
    PERFORM changefeed.create_partitions(7);
    PERFORM changefeed.ensure_notifier();
    RETURN c.id;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._alter(tbl regclass, retention interval DEFAULT NULL,
                                 keep_previous bool DEFAULT NULL, ttl_column text DEFAULT NULL,
                                 ranges int DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.require_table_owner(tbl, changefeed.caller(), 'alter the change feed of');
    -- The table, then the collection row (as disable() locks them): a
    -- concurrent disable() is seen here, not undone by the triggers below.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    PERFORM 1 FROM changefeed.collection x WHERE x.id = c.id FOR UPDATE;
    c := changefeed.collection_of(tbl);
    IF retention IS NOT NULL THEN
        PERFORM changefeed.check_retention(retention);
    END IF;
    IF ranges IS NOT NULL AND (ranges < 1 OR ranges > 4096) THEN
        RAISE EXCEPTION 'ranges must be between 1 and 4096, not %', ranges USING ERRCODE = 'CF003';
    END IF;
    IF ttl_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[ttl_column], 'ttl');
        -- The TTL sweep deletes rows as the table owner: only for a role that
        -- may delete them itself (an admin without DELETE may not).
        IF ttl_column IS DISTINCT FROM c.ttl_column THEN
            PERFORM changefeed.require_delete_rows(tbl, changefeed.caller(), 'set a TTL column on');
        END IF;
        IF (SELECT atttypid FROM pg_attribute WHERE attrelid = tbl AND attname = ttl_column)
           NOT IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype) THEN
            RAISE EXCEPTION 'ttl column "%" must be a timestamptz, timestamp or date', ttl_column
                USING ERRCODE = 'CF003';
        END IF;
    END IF;
    IF ranges IS NOT NULL AND ranges <> c.ranges THEN
        c := changefeed.change_ranges(c, ranges);
    END IF;
    UPDATE changefeed.collection AS col
       SET retention = coalesce($2, col.retention),        -- retention
           keep_previous = coalesce($3, col.keep_previous),  -- keep_previous
           ttl_column = coalesce($4, col.ttl_column)         -- ttl_column
     WHERE id = c.id
    RETURNING * INTO c;
    PERFORM changefeed.install_triggers(c);
END
$$;

CREATE OR REPLACE FUNCTION changefeed._maintain(as_of timestamptz DEFAULT now(),
    OUT partitions_created int, OUT partitions_dropped int, OUT ttl_deleted bigint,
    OUT failed_steps text[])
LANGUAGE plpgsql
SECURITY DEFINER SET search_path = pg_catalog, pg_temp
SET lock_timeout = '1s'   -- replaced below; the clause keeps the change inside this call
AS $$
DECLARE
    r record;
    ids bigint[];
    names text[];
    v bigint;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    -- Acting as if it were another time drops or expires early: admins only.
    IF as_of <> now() THEN
        PERFORM changefeed.require_admin(changefeed.caller(), 'run maintenance as of another time');
    END IF;
    partitions_created := 0; partitions_dropped := 0; ttl_deleted := 0; failed_steps := '{}';
    PERFORM set_config('lock_timeout',
                       coalesce(nullif(current_setting('changefeed.maintenance_lock_timeout', true), ''), '1s'),
                       true);
    -- One maintenance at a time.  A step of the maintenance worker is short:
    -- wait for it; another maintain() still running after the lock timeout
    -- does the same work, so this one returns without doing anything.
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtext('changefeed.maintain'));
    EXCEPTION WHEN lock_not_available THEN
        RETURN;
    END;

    ids := '{}'; names := '{}';
    BEGIN
        SELECT coalesce(array_agg(c.id ORDER BY c.id), '{}'), coalesce(array_agg(c.relid::regclass::text ORDER BY c.id), '{}')
          INTO ids, names
          FROM changefeed.collection c WHERE c.ttl_column IS NOT NULL AND c.disabled_at IS NULL;
    EXCEPTION WHEN OTHERS THEN
        failed_steps := failed_steps || 'list TTL collections'::text;
        PERFORM changefeed.warn_step_failed('list TTL collections', SQLSTATE, SQLERRM);
    END;
    FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
        SELECT * INTO r FROM changefeed.run_step(format('expire %s', names[i]),
            'SELECT changefeed.expire_step($2::int, $1)', as_of, ids[i], failed_steps);
        failed_steps := r.failed_steps;
        ttl_deleted := ttl_deleted + r.value;
    END LOOP;

    ids := '{}'; names := '{}';
    BEGIN
        SELECT coalesce(array_agg(c.id ORDER BY c.id), '{}'), coalesce(array_agg(c.relid::regclass::text ORDER BY c.id), '{}')
          INTO ids, names FROM changefeed.collection c;
    EXCEPTION WHEN OTHERS THEN
        failed_steps := failed_steps || 'list collections'::text;
        PERFORM changefeed.warn_step_failed('list collections', SQLSTATE, SQLERRM);
    END;
    FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
        SELECT * INTO r FROM changefeed.run_step(format('expire history of %s', names[i]),
            'SELECT changefeed.expire_history($2::int, $1)', as_of, ids[i], failed_steps);
        failed_steps := r.failed_steps;
    END LOOP;

    ids := '{}'; names := '{}';
    BEGIN
        SELECT coalesce(array_agg(e.part::oid::bigint ORDER BY e.written_before), '{}'),
               coalesce(array_agg(e.part::text ORDER BY e.written_before), '{}')
          INTO ids, names FROM changefeed.expired_partitions(as_of) e;
    EXCEPTION WHEN OTHERS THEN
        failed_steps := failed_steps || 'list expired partitions'::text;
        PERFORM changefeed.warn_step_failed('list expired partitions', SQLSTATE, SQLERRM);
    END;
    FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
        SELECT * INTO r FROM changefeed.run_step(format('drop %s', names[i]),
            'SELECT 1::bigint FROM changefeed.prune_partition($2::oid::regclass, $1)', as_of, ids[i],
            failed_steps);
        failed_steps := r.failed_steps;
        partitions_dropped := partitions_dropped + r.value;
    END LOOP;

    SELECT * INTO r FROM changefeed.run_step('prune default partition',
        'SELECT changefeed.prune_default($1)', as_of, NULL, failed_steps);
    failed_steps := r.failed_steps;
    SELECT * INTO r FROM changefeed.run_step('create partitions',
        'SELECT changefeed.create_partitions(7, $1)::bigint', as_of, NULL, failed_steps);
    failed_steps := r.failed_steps;
    partitions_created := r.value;
    SELECT * INTO r FROM changefeed.run_step('prune ticks',
        'SELECT changefeed.prune_ticks($1)', as_of, NULL, failed_steps);
    failed_steps := r.failed_steps;
    SELECT * INTO r FROM changefeed.run_step('prune applied',
        'SELECT changefeed.prune_applied($1)', as_of, NULL, failed_steps);
    failed_steps := r.failed_steps;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._lease_release(tbl regclass, processor text, instance text,
                                         range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_leaving(tbl, processor, instance);
    n int;
BEGIN
    PERFORM 1 FROM changefeed.lease l   -- in range order (see lease_renew)
      WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance
        AND (range_ids IS NULL OR l.range_id = ANY (range_ids))
      ORDER BY l.range_id FOR NO KEY UPDATE;
    UPDATE changefeed.lease l
       SET owner = NULL, expires_at = NULL, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance
       AND (range_ids IS NULL OR l.range_id = ANY (range_ids));
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._instance_register(tbl regclass, processor text, instance text, token text)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
    me int := pg_backend_pid();
    my_start timestamptz := (SELECT a.backend_start FROM pg_stat_get_activity(pg_backend_pid()) a);
    r changefeed.instance;
BEGIN
    IF token IS NULL OR token = '' THEN
        RAISE EXCEPTION 'instance token must not be empty' USING ERRCODE = 'CF003';
    END IF;
    -- A cap on the live instances of one processor (dead registrations do
    -- not count): balancing works over this list on every acquire.  Their
    -- sessions are looked at only when the registrations alone reach it.
    IF (SELECT count(*) FROM changefeed.instance i
         WHERE i.collection_id = c.id AND i.processor = processor AND i.instance <> instance) >= 1000
       AND (SELECT count(*) FROM changefeed.instance i
             WHERE i.collection_id = c.id AND i.processor = processor AND i.instance <> instance
               AND changefeed.session_alive(i.backend_pid, i.backend_start)) >= 1000 THEN
        RAISE EXCEPTION 'processor "%" on % has 1000 live instances already', processor, tbl
            USING ERRCODE = 'CF018',
                  HINT = 'Stop instances first; more instances than ranges only wait for a range to free up.';
    END IF;
    INSERT INTO changefeed.instance AS i
           (collection_id, processor, instance, token, backend_pid, backend_start)
    VALUES (c.id, processor, instance, token, me, my_start)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        SELECT * INTO r FROM changefeed.instance i
         WHERE i.collection_id = c.id AND i.processor = processor AND i.instance = instance
           FOR UPDATE;
        IF r.token = token THEN
            UPDATE changefeed.instance i
               SET backend_pid = me, backend_start = my_start, heartbeat_at = now()
             WHERE i.collection_id = c.id AND i.processor = processor AND i.instance = instance;
            RETURN;
        END IF;
        IF NOT (r.backend_pid = me AND r.backend_start IS NOT DISTINCT FROM my_start)
           AND changefeed.session_alive(r.backend_pid, r.backend_start) THEN
            RAISE EXCEPTION 'instance "%" of processor "%" on % is already running', instance, processor, tbl
                USING ERRCODE = 'CF015',
                      DETAIL = format('It registered at %s from the session with pid %s, which is still alive.',
                                      r.registered_at, r.backend_pid),
                      HINT = 'Choose another instance name (or none: the default is unique per process), '
                             'or stop the other instance.';
        END IF;
        UPDATE changefeed.instance i
           SET token = token, backend_pid = me, backend_start = my_start,
               registered_at = now(), heartbeat_at = now()
         WHERE i.collection_id = c.id AND i.processor = processor AND i.instance = instance;
    END IF;
    -- A new holder of the name: fence the previous one's leases.
    UPDATE changefeed.lease l
       SET epoch = l.epoch + 1, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._instance_unregister(tbl regclass, processor text, instance text, token text)
RETURNS bool LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_leaving(tbl, processor, instance);
BEGIN
    DELETE FROM changefeed.instance i
     WHERE i.collection_id = c.id AND i.processor = processor AND i.instance = instance
       AND i.token = token;
    RETURN FOUND;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._dedup_applied(tbl regclass, processor text, event_ids text[])
RETURNS SETOF text LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
BEGIN
    PERFORM changefeed.require_select(tbl, changefeed.caller(), 'use the deduplication store of a processor on');
    PERFORM changefeed.check_event_ids(event_ids);
    RETURN QUERY
        SELECT a.event_id FROM changefeed.applied a
         WHERE a.collection_id = c.id AND a.processor = processor AND a.event_id = ANY (event_ids);
END
$$;

CREATE OR REPLACE FUNCTION changefeed._dedup_record(tbl regclass, processor text, event_ids text[])
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
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

CREATE FUNCTION changefeed._reserve_processor(tbl regclass, processor text, owner regrole) RETURNS bool
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    held oid;
BEGIN
    PERFORM changefeed.require_admin(changefeed.caller(), 'reserve processor names');
    PERFORM changefeed.check_name(processor, 'processor');
    IF owner IS NULL THEN
        RAISE EXCEPTION 'owner must not be null' USING ERRCODE = 'CF003';
    END IF;
    SELECT p.owner_role INTO held FROM changefeed.processor p
     WHERE p.collection_id = c.id AND p.name = processor FOR UPDATE;
    IF held = owner THEN
        RETURN false;
    END IF;
    DELETE FROM changefeed.applied a WHERE a.collection_id = c.id AND a.processor = processor;
    DELETE FROM changefeed.lease l WHERE l.collection_id = c.id AND l.processor = processor;
    DELETE FROM changefeed.instance i WHERE i.collection_id = c.id AND i.processor = processor;
    INSERT INTO changefeed.processor AS p (collection_id, name, owner_role)
    VALUES (c.id, processor, owner)
    ON CONFLICT ON CONSTRAINT processor_pkey DO UPDATE SET owner_role = excluded.owner_role, created_at = now();
    RETURN true;
END
$$;
CREATE FUNCTION changefeed.reserve_processor(tbl regclass, processor text, owner regrole)
RETURNS boolean LANGUAGE c VOLATILE PARALLEL UNSAFE AS 'MODULE_PATHNAME', 'changefeed_call_definer';
REVOKE ALL ON FUNCTION changefeed.require_select(regclass, oid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.may_delete_rows(regclass, oid) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.require_delete_rows(regclass, oid, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.processor_leaving(regclass, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.max_retention() FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.check_retention(interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.effective_retention(interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.expire_history(int, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.step_timeout_begin() FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.step_timeout_end() FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.run_step(text, text, timestamptz, bigint, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.expire_step(int, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed._reserve_processor(regclass, text, regrole) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.reserve_processor(regclass, text, regrole) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION changefeed.reserve_processor(regclass, text, regrole) TO changefeed_admin;

-- ---- own SQLSTATEs for lost capture and changed ranges; shared argument checks ----
-- History lost because capture was off raises CF019 (retention's stays CF006),
-- a range id the collection does not have CF020 (was 22023); the checks of
-- the number of ranges, of read arguments and reset/resync's lease restart
-- are written once (17_validators.sql, restart_leases).

CREATE OR REPLACE FUNCTION changefeed.check_ranges_count(n int) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF n IS NULL OR n < 1 OR n > 4096 THEN
        RAISE EXCEPTION 'ranges must be between 1 and 4096, not %', coalesce(n::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION changefeed.check_read_args(mode text, max_changes int) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF mode IS NULL OR mode NOT IN ('all', 'latest') THEN
        RAISE EXCEPTION 'mode must be ''all'' or ''latest'', not %', coalesce(quote_literal(mode), 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF max_changes IS NULL OR max_changes < 1 OR max_changes > 100000 THEN
        RAISE EXCEPTION 'max_changes must be between 1 and 100000, not %', coalesce(max_changes::text, 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION changefeed.check_range_ids(c changefeed.collection, range_ids int[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF range_ids IS NOT NULL
       AND (cardinality(range_ids) = 0
            OR EXISTS (SELECT 1 FROM unnest(range_ids) r WHERE r IS NULL OR r < 0 OR r >= c.ranges)) THEN
        RAISE EXCEPTION 'range ids must be between 0 and %', c.ranges - 1
            USING ERRCODE = 'CF020';
    END IF;
END
$$;

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

CREATE OR REPLACE FUNCTION changefeed.check_history(c changefeed.collection, lo pg_snapshot) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    h changefeed.horizon;
BEGIN
    SELECT * INTO h FROM changefeed.horizon WHERE collection_id = c.id;
    IF FOUND AND NOT changefeed.snapshot_covers(lo, h.dropped_txid) THEN
        IF h.cause = 'disabled' THEN
            RAISE EXCEPTION 'history lost for %: capture was disabled after this position', c.relid::regclass
                USING ERRCODE = 'CF019',
                      DETAIL = format('Capture of %s was off from %s until %s (transaction %s); writes of that time were not logged.',
                                      c.relid::regclass, h.disabled_from, h.dropped_before, h.dropped_txid),
                      HINT = 'The feed cannot resume from this position. Rebuild the consumer from the table '
                             '(see docs/runbooks/history-lost.md), then continue from a new position.';
        END IF;
        RAISE EXCEPTION 'history lost for %: retention dropped changes that this position had not read',
                        c.relid::regclass
            USING ERRCODE = 'CF006',
                  DETAIL = format('Changes up to transaction %s, written before %s, were dropped at %s; the retention of %s is %s.',
                                  h.dropped_txid, h.dropped_before, h.dropped_at, c.relid::regclass, c.retention),
                  HINT = 'The feed cannot resume from this position. Rebuild the consumer from the table '
                         '(see docs/runbooks/history-lost.md), then continue from a new position.';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._read(
    tbl regclass,
    since text,
    max_changes int DEFAULT 1000,
    ranges int[] DEFAULT NULL,
    mode text DEFAULT 'all',
    filter jsonpath DEFAULT NULL,
    filter_vars jsonb DEFAULT NULL,
    doc_ids text[] DEFAULT NULL,
    only_tenant text DEFAULT NULL)   -- `tenant` in the entry point (90_privileges.sql)
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
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET jit = off SET plan_cache_mode = force_generic_plan SET work_mem = '64MB' AS $$
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

CREATE OR REPLACE FUNCTION changefeed._enable(
    tbl regclass,
    partition_key text[] DEFAULT NULL,
    ranges int DEFAULT 16,
    retention interval DEFAULT '7 days',
    keep_previous bool DEFAULT true,
    tenant_column text DEFAULT NULL,
    ttl_column text DEFAULT NULL,
    replicated bool DEFAULT false)
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kind "char";
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
    -- Shapes whose writes could escape capture (the guard keeps them out later).
    holes := changefeed.shape_problems(tbl);
    IF cardinality(holes) > 0 THEN
        RAISE EXCEPTION 'table % cannot be enabled: writes could escape capture', tbl
            USING ERRCODE = 'CF013',
                  DETAIL = array_to_string(holes, '; ') || '.',
                  HINT = 'Enable the partitioned root of a partition tree; detach inheritance children '
                         '(ALTER TABLE ... NO INHERIT) first.';
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
    IF partition_key IS NULL THEN
        partition_key := keys;
    ELSIF cardinality(partition_key) = 0 THEN
        RAISE EXCEPTION 'partition_key must name at least one column' USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.attnums_of(tbl, partition_key, 'partition key');
    IF tenant_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[tenant_column], 'tenant');
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
        RETURN changefeed.resume(existing, keys, partition_key, ranges, retention, keep_previous,
                                 tenant_column, ttl_column, replicated);
    ELSIF existing.id IS NOT NULL THEN
        IF (existing.partition_key, existing.ranges, existing.retention, existing.keep_previous,
            existing.tenant_column, existing.ttl_column, existing.replicated)
           IS NOT DISTINCT FROM (partition_key, ranges, retention, keep_previous, tenant_column, ttl_column,
                                 replicated) THEN
            RETURN existing.id;
        END IF;
        RAISE EXCEPTION 'table % is already enabled with other options', tbl
            USING ERRCODE = 'CF008',
                  HINT = 'Change retention, previous images, the TTL column or the ranges with changefeed.alter(); '
                         'for other options, disable it (its checkpoints are kept) and enable it again.';
    END IF;

    INSERT INTO changefeed.collection AS col
           (relid, key_columns, partition_key, ranges, retention, keep_previous, tenant_column, ttl_column,
            replicated)
    VALUES (tbl, keys, partition_key, ranges, retention, keep_previous, tenant_column, ttl_column, replicated)
    RETURNING * INTO c;
    PERFORM changefeed.install_triggers(c);
    -- Partitions are made here rather than in the install script, so that
    -- retention may drop them (extension members cannot be dropped alone).
    PERFORM changefeed.create_partitions(7);
    PERFORM changefeed.ensure_notifier();
    RETURN c.id;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._alter(tbl regclass, retention interval DEFAULT NULL,
                                 keep_previous bool DEFAULT NULL, ttl_column text DEFAULT NULL,
                                 ranges int DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.require_table_owner(tbl, changefeed.caller(), 'alter the change feed of');
    -- The table, then the collection row (as disable() locks them): a
    -- concurrent disable() is seen here, not undone by the triggers below.
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    PERFORM 1 FROM changefeed.collection x WHERE x.id = c.id FOR UPDATE;
    c := changefeed.collection_of(tbl);
    IF retention IS NOT NULL THEN
        PERFORM changefeed.check_retention(retention);
    END IF;
    IF ranges IS NOT NULL THEN
        PERFORM changefeed.check_ranges_count(ranges);
    END IF;
    IF ttl_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[ttl_column], 'ttl');
        -- The TTL sweep deletes rows as the table owner: only for a role that
        -- may delete them itself (an admin without DELETE may not).
        IF ttl_column IS DISTINCT FROM c.ttl_column THEN
            PERFORM changefeed.require_delete_rows(tbl, changefeed.caller(), 'set a TTL column on');
        END IF;
        IF (SELECT atttypid FROM pg_attribute WHERE attrelid = tbl AND attname = ttl_column)
           NOT IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype) THEN
            RAISE EXCEPTION 'ttl column "%" must be a timestamptz, timestamp or date', ttl_column
                USING ERRCODE = 'CF003';
        END IF;
    END IF;
    IF ranges IS NOT NULL AND ranges <> c.ranges THEN
        c := changefeed.change_ranges(c, ranges);
    END IF;
    UPDATE changefeed.collection AS col
       SET retention = coalesce($2, col.retention),        -- retention
           keep_previous = coalesce($3, col.keep_previous),  -- keep_previous
           ttl_column = coalesce($4, col.ttl_column)         -- ttl_column
     WHERE id = c.id
    RETURNING * INTO c;
    PERFORM changefeed.install_triggers(c);
END
$$;

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
    -- Leases in the order lease writers lock them.
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
            l.expires_at := NULL;
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

CREATE OR REPLACE FUNCTION changefeed._lag(tbl regclass, processor text, count_limit int DEFAULT 10000)
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
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    who oid := changefeed.caller();
    l changefeed.lease;
    p record;
    tenants text[];
BEGIN
    BEGIN
        tenants := changefeed.require_read(tbl, who, c.tenant_column, NULL);
    EXCEPTION WHEN insufficient_privilege THEN
        IF NOT changefeed.is_admin(who) THEN
            RAISE;
        END IF;
        tenants := nullif(changefeed.tenants_of(who), '{}');
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
        live := l.owner IS NOT NULL AND l.expires_at > now();
        epoch := l.epoch;
        checkpoint_age := now() - l.updated_at;
        history_lost := false;
        BEGIN
            p := changefeed.position_decode(l.checkpoint);
            PERFORM changefeed.check_history(c, p.lo);
            SELECT count(*), min(r.written_at) INTO pending, oldest_pending
              FROM changefeed.read_windows(c.id, ARRAY[l.range_id], p.lo, p.hi, p.last_seq, count_limit,
                                           NULL, tenants, false) r;
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

CREATE OR REPLACE FUNCTION changefeed._reset_checkpoint(tbl regclass, processor text, "position" text DEFAULT NULL,
                                            range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    pos text := coalesce("position", changefeed.current_position());
BEGIN
    PERFORM changefeed.check_range_ids(c, range_ids);
    PERFORM changefeed.check_history(c, (changefeed.position_decode(pos)).lo);
    RETURN changefeed.restart_leases(c, processor, range_ids, pos, backfill => false);
END
$$;

CREATE OR REPLACE FUNCTION changefeed.restart_leases(c changefeed.collection, processor text, range_ids int[], pos text,
                                          backfill bool) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    n int;
BEGIN
    PERFORM 1 FROM changefeed.lease l   -- in range order (see lease_renew)
      WHERE l.collection_id = c.id AND l.processor = processor
        AND (range_ids IS NULL OR l.range_id = ANY (range_ids))
      ORDER BY l.range_id FOR NO KEY UPDATE;
    UPDATE changefeed.lease l
       SET checkpoint = pos, owner = NULL, expires_at = NULL, epoch = l.epoch + 1,
           backfill_done = NOT backfill, backfill_after = NULL,
           backfill_rows = CASE WHEN backfill THEN 0 ELSE l.backfill_rows END,
           backfill_position = CASE WHEN backfill THEN pos END, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor
       AND (range_ids IS NULL OR l.range_id = ANY (range_ids));
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
        RAISE EXCEPTION 'processor "%" has never run on %', processor, c.relid::regclass
            USING ERRCODE = 'CF012', HINT = 'Leases are created when a processor first starts.';
    END IF;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION changefeed._resync_processor(tbl regclass, processor text, range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
BEGIN
    PERFORM changefeed.check_range_ids(c, range_ids);
    RETURN changefeed.restart_leases(c, processor, range_ids, changefeed.current_position(), backfill => true);
END
$$;
REVOKE ALL ON FUNCTION changefeed.check_ranges_count(int) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.check_read_args(text, int) FROM PUBLIC;
REVOKE ALL ON FUNCTION changefeed.restart_leases(changefeed.collection, text, int[], text, bool) FROM PUBLIC;

-- ---- PostgreSQL 18: virtual generated columns refused by enable() and the guard ----
CREATE FUNCTION changefeed.virtual_column_problems(tbl oid) RETURNS SETOF text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT format('column %I of %s is a virtual generated column, which a row trigger sees as null (make it STORED)',
                  a.attname, a.attrelid::regclass)
      FROM pg_attribute a
     WHERE a.attrelid IN (SELECT changefeed.tree_of(tbl)) AND a.attnum > 0 AND NOT a.attisdropped
       AND a.attgenerated = 'v'
     ORDER BY a.attrelid, a.attnum
$$;

CREATE OR REPLACE FUNCTION changefeed.shape_problems(tbl oid) RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(p ORDER BY n, p), '{}') FROM (
        SELECT 1, format('%s is a partition of %s', i.inhrelid::regclass, i.inhparent::regclass)
          FROM pg_inherits i JOIN pg_class r ON r.oid = i.inhrelid
         WHERE i.inhrelid = tbl AND r.relispartition
        UNION ALL
        SELECT 2, format('%s inherits from %s', i.inhrelid::regclass, i.inhparent::regclass)
          FROM pg_inherits i JOIN pg_class r ON r.oid = i.inhrelid
         WHERE (i.inhrelid = tbl OR i.inhparent IN (SELECT changefeed.tree_of(tbl))) AND NOT r.relispartition
        UNION ALL
        SELECT 3, format('partition %s is a foreign table', r.oid::regclass)
          FROM pg_class r WHERE r.oid IN (SELECT changefeed.tree_of(tbl)) AND r.relkind = 'f'
        UNION ALL
        SELECT 4, format('partition %s is enabled itself (collection %s)', c.relid::regclass, c.id)
          FROM changefeed.collection c
         WHERE c.relid IN (SELECT changefeed.tree_of(tbl)) AND c.relid <> tbl AND c.disabled_at IS NULL
        UNION ALL
        SELECT 5, problem FROM changefeed.virtual_column_problems(tbl) problem
    ) problems(n, p)
$$;
REVOKE ALL ON FUNCTION changefeed.virtual_column_problems(oid) FROM PUBLIC;
