-- changefeed: retention, history loss, TTL, changing options (the ranges: 55_ranges.sql).
--
-- Retention drops whole daily partitions of changefeed.log (DROP TABLE, never
-- DELETE) once they are older than the longest retention of any collection.
-- Before dropping, it records per collection the newest transaction id in the
-- partition (one index descent per range, so the cost does not grow with the
-- number of rows) in changefeed.horizon.  A read whose position has not
-- delivered everything up to that id fails with CF006 (history lost).

-- Whether everything up to and including transaction `upto` is visible in `lo`,
-- i.e. a reader at `lo` had already been delivered every dropped change.
CREATE FUNCTION changefeed.snapshot_covers(lo pg_snapshot, upto xid8) RETURNS bool
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT upto < pg_catalog.pg_snapshot_xmax(lo)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_snapshot_xip(lo) x WHERE x <= upto)
$$;

-- Raises CF006 when retention dropped changes that a reader at `lo` has not
-- read, or when capture was off (disable, then enable) after `lo`.
CREATE FUNCTION changefeed.check_history(c changefeed.collection, lo pg_snapshot) RETURNS void
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

-- Moves a collection's horizon forward to cover transaction `upto`; the
-- cause is that of the newest transaction covered.
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

-- Records what dropping the partition `part` loses, per collection.
CREATE FUNCTION changefeed.record_horizon(part regclass, written_before timestamptz) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection;
    newest xid8;
    m xid8;
BEGIN
    FOR c IN SELECT * FROM changefeed.collection LOOP
        newest := NULL;
        FOR r IN 0 .. c.ranges - 1 LOOP
            EXECUTE format('SELECT max(txid) FROM %s WHERE collection_id = $1 AND range_id = $2', part)
               INTO m USING c.id, r;
            IF m IS NOT NULL AND (newest IS NULL OR m > newest) THEN newest := m; END IF;
        END LOOP;
        IF newest IS NOT NULL THEN
            PERFORM changefeed.raise_horizon(c.id, newest, written_before);
        END IF;
    END LOOP;
END
$$;

-- Maintenance steps.  Each step is small and stands alone, so that the
-- maintenance worker (extension/maintainer.cpp) runs each in its own
-- transaction with a lock_timeout and maintain() each in its own
-- subtransaction: a step that fails (a lock it cannot get, a user trigger that
-- raises) is reported and retried next time, and the other steps go on.
-- A step that touches a user table (TTL) takes no lock on changefeed.log
-- before it, and a partition step touches no user table.

-- Rejects NULL and infinite times: maintenance must never act on a time it
-- was not given (NULL once meant "drop every partition, future ones too").
CREATE FUNCTION changefeed.require_finite(t timestamptz, what text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF t IS NULL THEN
        RAISE EXCEPTION '% must not be null', what
            USING ERRCODE = 'CF003', HINT = 'Pass a time, e.g. now().';
    END IF;
    IF NOT isfinite(t) THEN
        RAISE EXCEPTION '% must be a finite time, not %', what, t
            USING ERRCODE = 'CF003', HINT = 'Pass a time, e.g. now().';
    END IF;
END
$$;

-- The oldest time retention keeps at `as_of`: the longest retention of any collection.
CREATE FUNCTION changefeed.retention_cutoff(as_of timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT as_of - coalesce((SELECT max(retention) FROM changefeed.collection), interval '7 days')
$$;

-- The daily partitions of the log wholly older than the retention cutoff at
-- `as_of`, oldest first, with the end of their day.
CREATE FUNCTION changefeed.expired_partitions(as_of timestamptz)
RETURNS TABLE (part regclass, written_before timestamptz)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cutoff timestamptz;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    cutoff := changefeed.retention_cutoff(as_of);
    RETURN QUERY
        SELECT p.rel, p.upper_bound
          FROM (SELECT c.oid::regclass AS rel,
                       (to_date(substr(c.relname, 5), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' AS upper_bound
                  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'changefeed.log'::regclass AND c.relname ~ '^log_[0-9]{8}$') p
         WHERE p.upper_bound <= cutoff
         ORDER BY p.upper_bound;
END
$$;

-- Whether `rel` is a member of the changefeed extension.
CREATE FUNCTION changefeed.is_extension_member(rel regclass) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                    WHERE d.classid = 'pg_class'::regclass AND d.objid = rel
                      AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                      AND e.extname = 'changefeed')
$$;

-- Drops one expired daily partition, recording first (in the same
-- transaction) what it loses per collection.  Refuses anything that is not a
-- daily partition of the log wholly older than the retention at `as_of`.
CREATE FUNCTION changefeed.prune_partition(part regclass, as_of timestamptz) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    upper_bound timestamptz;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    SELECT e.written_before INTO upper_bound FROM changefeed.expired_partitions(as_of) e WHERE e.part = prune_partition.part;
    IF NOT FOUND THEN
        RAISE EXCEPTION '% is not a daily partition of changefeed.log older than the retention', part
            USING ERRCODE = 'CF003', DETAIL = format('As of %s.', as_of);
    END IF;
    PERFORM changefeed.record_horizon(part, upper_bound);
    -- Partitions are extension members (so pg_dump leaves them out); a member
    -- cannot be dropped alone.
    IF changefeed.is_extension_member(part) THEN
        EXECUTE format('ALTER EXTENSION changefeed DROP TABLE %s', part);
    END IF;
    EXECUTE format('DROP TABLE %s', part);
END
$$;

-- Deletes rows older than the retention from the default partition (only
-- there when partitions were not created in time).  Returns how many.
CREATE FUNCTION changefeed.prune_default(as_of timestamptz) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cutoff timestamptz;
    n bigint;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    cutoff := changefeed.retention_cutoff(as_of);
    IF NOT EXISTS (SELECT 1 FROM changefeed.log_default WHERE written_at < cutoff) THEN
        RETURN 0;
    END IF;
    PERFORM changefeed.raise_horizon(collection_id, max(txid), cutoff)
       FROM changefeed.log_default WHERE written_at < cutoff GROUP BY collection_id;
    DELETE FROM changefeed.log_default WHERE written_at < cutoff;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Deletes ticks older than every retention: no reader can use them.
CREATE FUNCTION changefeed.prune_ticks(as_of timestamptz) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    DELETE FROM changefeed.tick WHERE at < changefeed.retention_cutoff(as_of);
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- Drops daily partitions wholly older than the longest retention, cleans the
-- default partition and old ticks, in the caller's transaction.  `as_of` lets
-- tests and operators act as if it were later.  Returns how many partitions it dropped.
CREATE FUNCTION changefeed.prune(as_of timestamptz DEFAULT now()) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    p record;
    dropped int := 0;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    FOR p IN SELECT * FROM changefeed.expired_partitions(as_of) LOOP
        PERFORM changefeed.prune_partition(p.part, as_of);
        dropped := dropped + 1;
    END LOOP;
    PERFORM changefeed.prune_default(as_of);
    PERFORM changefeed.prune_ticks(as_of);
    RETURN dropped;
END
$$;

-- Deletes one collection's rows whose TTL column is before `as_of`, as the
-- table owner inside a security-restricted operation; the deletes carry
-- ttl_expired.  Returns how many rows it deleted (extension/ttl.cpp).
CREATE FUNCTION changefeed.expire_rows(collection_id int, as_of timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'changefeed_expire_rows' LANGUAGE C;

-- Deletes the expired rows of every collection with a TTL column.
CREATE FUNCTION changefeed.expire(as_of timestamptz DEFAULT now()) RETURNS bigint
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

-- Reports a failed maintenance step; the same words as the maintenance worker's.
CREATE FUNCTION changefeed.warn_step_failed(step text, state text, message text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE WARNING 'changefeed maintenance: step "%" failed: %', step, message
        USING DETAIL = format('SQLSTATE %s. The step is retried on the next run.', state);
END
$$;

-- Keeps the log ready: TTL, retention, partitions ahead.  Run by processors
-- now and then, by an admin, or by cron (the maintenance worker runs the same
-- steps when the library is preloaded):
--   SELECT cron.schedule('changefeed', '*/10 * * * *', 'SELECT changefeed.maintain()');
-- Each step runs in its own subtransaction with lock_timeout set to
-- changefeed.maintenance_lock_timeout: a step that fails is named in
-- failed_steps and in a WARNING, and the others go on.  In one transaction
-- the steps that touch user tables (TTL) come first, so that no lock on the
-- log is held while they wait; the partition steps come last.
CREATE FUNCTION changefeed.maintain(as_of timestamptz DEFAULT now(),
    OUT partitions_created int, OUT partitions_dropped int, OUT ttl_deleted bigint,
    OUT failed_steps text[])
LANGUAGE plpgsql
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

-- Changes a collection's retention, previous images, TTL column or number
-- of ranges, while it runs.  New ranges move the logged changes and the
-- processors' checkpoints with them and fence running instances, under a
-- lock that holds writers off until commit (55_ranges.sql).  (The key and the
-- partition key go with disable() and enable(): the logged changes were
-- placed in ranges by them.)
CREATE FUNCTION changefeed.alter(tbl regclass, retention interval DEFAULT NULL,
                                 keep_previous bool DEFAULT NULL, ttl_column text DEFAULT NULL,
                                 ranges int DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
