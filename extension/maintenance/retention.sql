-- changefeed: retention, history loss, TTL, changing options (the ranges: maintenance/ranges.sql).
--
-- Retention drops whole daily partitions of changefeed.log (DROP TABLE, never
-- DELETE) once they are older than the longest retention of any collection.
-- Before dropping, it records per collection the newest transaction id in the
-- partition (one index descent per range, so the cost does not grow with the
-- number of rows) in changefeed.horizon.  A read whose position has not
-- delivered everything up to that id fails with CF006 (history lost).

-- Whether everything up to and including transaction `upto` is visible in `lo`,
-- i.e. a reader at `lo` had already been delivered every dropped change.
CREATE OR REPLACE FUNCTION changefeed.snapshot_covers(lo pg_snapshot, upto xid8) RETURNS bool
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT upto < pg_catalog.pg_snapshot_xmax(lo)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_snapshot_xip(lo) x WHERE x <= upto)
$$;

-- Raises CF006 when retention dropped changes that a reader at `lo` has not
-- read, CF019 when capture was off (disable, then enable) after `lo`.
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

-- Moves a collection's horizon forward to cover transaction `upto`; the
-- cause is that of the newest transaction covered.
CREATE OR REPLACE FUNCTION changefeed.raise_horizon(collection_id int, upto xid8, written_before timestamptz,
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
CREATE OR REPLACE FUNCTION changefeed.record_horizon(part regclass, written_before timestamptz) RETURNS void
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
-- maintenance worker (extension/maintenance/maintainer.cpp) runs each in its own
-- transaction with a lock_timeout and maintain() each in its own
-- subtransaction: a step that fails (a lock it cannot get, a user trigger that
-- raises) is reported and retried next time, and the other steps go on.
-- A step that touches a user table (TTL) takes no lock on changefeed.log
-- before it, and a partition step touches no user table.

-- Rejects NULL and infinite times: maintenance must never act on a time it
-- was not given (NULL once meant "drop every partition, future ones too").
CREATE OR REPLACE FUNCTION changefeed.require_finite(t timestamptz, what text) RETURNS void
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

-- changefeed.max_retention as an interval (extension/maintenance/maintenance_limits.cpp):
-- the longest retention a collection may have, set by the server's
-- administrator so that no table owner keeps the shared log for everyone.
CREATE OR REPLACE FUNCTION changefeed.max_retention() RETURNS interval
    AS 'MODULE_PATHNAME', 'changefeed_max_retention_interval' LANGUAGE C STABLE PARALLEL SAFE;

-- A collection's retention as given to enable() or alter(): positive, at most
-- changefeed.max_retention, and one that times can be computed with (CF003).
CREATE OR REPLACE FUNCTION changefeed.check_retention(retention interval) RETURNS interval
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

-- A collection's retention as maintenance applies it: at most the maximum
-- (a retention set before the maximum was lowered is cut to it).
CREATE OR REPLACE FUNCTION changefeed.effective_retention(retention interval) RETURNS interval
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT least(retention, changefeed.max_retention())
$$;

-- The oldest time retention keeps at `as_of`: the longest retention of any
-- collection, at most changefeed.max_retention.
CREATE OR REPLACE FUNCTION changefeed.retention_cutoff(as_of timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT as_of - changefeed.effective_retention(
        coalesce((SELECT max(retention) FROM changefeed.collection), interval '7 days'))
$$;

-- A maintenance step: the changes of collection `collection_id` older than
-- its own retention at `as_of` expire even while their partition is kept for
-- a collection with a longer retention.  They are not deleted (retention
-- drops whole partitions) but cut off: the collection's horizon is raised to
-- the newest of them, so a position that had not read them reports history
-- lost (CF006) as if their partition were dropped, and a position that had
-- read them never reads them again.  One index descent per range.  Returns
-- whether the horizon moved.
CREATE OR REPLACE FUNCTION changefeed.expire_history(collection_id int, as_of timestamptz) RETURNS bigint
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

-- The daily partitions of the log wholly older than the retention cutoff at
-- `as_of`, oldest first, with the end of their day.
CREATE OR REPLACE FUNCTION changefeed.expired_partitions(as_of timestamptz)
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
CREATE OR REPLACE FUNCTION changefeed.is_extension_member(rel regclass) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                    WHERE d.classid = 'pg_class'::regclass AND d.objid = rel
                      AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                      AND e.extname = 'changefeed')
$$;

-- Drops one expired daily partition, recording first (in the same
-- transaction) what it loses per collection.  Refuses anything that is not a
-- daily partition of the log wholly older than the retention at `as_of`.
CREATE OR REPLACE FUNCTION changefeed.prune_partition(part regclass, as_of timestamptz) RETURNS void
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
CREATE OR REPLACE FUNCTION changefeed.prune_default(as_of timestamptz) RETURNS bigint
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
CREATE OR REPLACE FUNCTION changefeed.prune_ticks(as_of timestamptz) RETURNS bigint
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT changefeed.require_finite(as_of, 'as_of');
    WITH gone AS (DELETE FROM changefeed.tick WHERE at < changefeed.retention_cutoff(as_of) RETURNING 1)
    SELECT count(*) FROM gone;
$$;

-- Drops daily partitions wholly older than the longest retention, cleans the
-- default partition and old ticks, in the caller's transaction.  `as_of` lets
-- tests and operators act as if it were later.  Returns how many partitions it dropped.
CREATE OR REPLACE FUNCTION changefeed.prune(as_of timestamptz DEFAULT now()) RETURNS int
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
-- ttl_expired.  Returns how many rows it deleted (extension/maintenance/ttl.cpp).
CREATE OR REPLACE FUNCTION changefeed.expire_rows(collection_id int, as_of timestamptz) RETURNS bigint
    AS 'MODULE_PATHNAME', 'changefeed_expire_rows' LANGUAGE C;

-- Deletes the expired rows of every collection with a TTL column.
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

-- Reports a failed maintenance step; the same words as the maintenance worker's.
CREATE OR REPLACE FUNCTION changefeed.warn_step_failed(step text, state text, message text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE WARNING 'changefeed maintenance: step "%" failed: %', step, message
        USING DETAIL = format('SQLSTATE %s. The step is retried on the next run.', state);
END
$$;

-- Bounds the maintenance step starting now by
-- changefeed.maintenance_statement_timeout; step_timeout_end() lifts the
-- bound and says whether the step ran past it (extension/maintenance/maintenance_limits.cpp).
CREATE OR REPLACE FUNCTION changefeed.step_timeout_begin() RETURNS void
    AS 'MODULE_PATHNAME', 'changefeed_step_timeout_begin' LANGUAGE C VOLATILE;
CREATE OR REPLACE FUNCTION changefeed.step_timeout_end() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_step_timeout_end' LANGUAGE C VOLATILE;

-- Runs one maintenance step of maintain(): `query` (ours, with $1 = as_of
-- and $2 = id) in a subtransaction of its own, bounded in time.  A step that
-- fails or times out is appended to `failed_steps` and reported in a WARNING;
-- the caller goes on with the next one.  A cancel that is not the step's
-- timeout (the user's, the statement's own timeout) ends maintain().
-- Returns the query's value (0 when it failed).
CREATE OR REPLACE FUNCTION changefeed.run_step(step text, query text, as_of timestamptz, id bigint,
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

-- Runs `step` (a format of the item's name) with `query` as run_step() does,
-- for each item that `listing` lists: rows (id bigint, name text, order),
-- $1 the time.  A listing that fails is the failed step `listing_step`, and
-- nothing runs.  Returns the sum of the steps' values.
CREATE OR REPLACE FUNCTION changefeed.run_step_each(listing_step text, listing text, step text, query text,
                                                    as_of timestamptz, INOUT failed_steps text[], OUT total bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    ids bigint[] := '{}';
    names text[] := '{}';
    r record;
BEGIN
    total := 0;
    BEGIN
        EXECUTE format('SELECT coalesce(array_agg(l.id ORDER BY l.ord), ''{}''), '
                       'coalesce(array_agg(l.name ORDER BY l.ord), ''{}'') FROM (%s) l(id, name, ord)', listing)
           INTO ids, names USING as_of;
    EXCEPTION WHEN OTHERS THEN
        failed_steps := failed_steps || listing_step;
        PERFORM changefeed.warn_step_failed(listing_step, SQLSTATE, SQLERRM);
    END;
    FOR i IN 1 .. coalesce(array_length(ids, 1), 0) LOOP
        SELECT * INTO r FROM changefeed.run_step(format(step, names[i]), query, as_of, ids[i], failed_steps);
        failed_steps := r.failed_steps;
        total := total + r.value;
    END LOOP;
END
$$;

-- The TTL step of maintain(): expire_rows() of one collection.  Acting as if
-- it were later deletes rows before their time: only for a caller that may
-- delete them itself (an admin without DELETE on the table may not).
CREATE OR REPLACE FUNCTION changefeed.expire_step(collection_id int, as_of timestamptz) RETURNS bigint
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

-- Keeps the log ready: TTL, retention, partitions ahead.  Run by processors
-- now and then, by an admin, or by cron (the maintenance worker runs the same
-- steps when the library is preloaded):
--   SELECT cron.schedule('changefeed', '*/10 * * * *', 'SELECT changefeed.maintain()');
-- Each step, the queries listing the partitions and collections to work on
-- included, runs in its own subtransaction (run_step) with lock_timeout set to
-- changefeed.maintenance_lock_timeout and bounded by
-- changefeed.maintenance_statement_timeout: a step that fails or times out is
-- named in failed_steps and in a WARNING, and the others go on.  In one
-- transaction the steps that touch user tables (TTL) come first, so that no
-- lock on the log is held while they wait; the partition steps come last.
CREATE OR REPLACE FUNCTION changefeed.maintain(as_of timestamptz DEFAULT now(),
    OUT partitions_created int, OUT partitions_dropped int, OUT ttl_deleted bigint,
    OUT failed_steps text[])
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET lock_timeout = '1s'   -- replaced below; the clause keeps the change inside this call
AS $$
DECLARE
    r record;
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

    SELECT * INTO r FROM changefeed.run_step_each('list TTL collections',
        'SELECT c.id::bigint, c.relid::regclass::text, c.id FROM changefeed.collection c
          WHERE c.ttl_column IS NOT NULL AND c.disabled_at IS NULL',
        'expire %s', 'SELECT changefeed.expire_step($2::int, $1)', as_of, failed_steps);
    failed_steps := r.failed_steps;
    ttl_deleted := r.total;
    SELECT * INTO r FROM changefeed.run_step_each('list collections',
        'SELECT c.id::bigint, c.relid::regclass::text, c.id FROM changefeed.collection c',
        'expire history of %s', 'SELECT changefeed.expire_history($2::int, $1)', as_of, failed_steps);
    failed_steps := r.failed_steps;
    SELECT * INTO r FROM changefeed.run_step_each('list expired partitions',
        'SELECT e.part::oid::bigint, e.part::text, e.written_before FROM changefeed.expired_partitions($1) e',
        'drop %s', 'SELECT 1::bigint FROM changefeed.prune_partition($2::oid::regclass, $1)', as_of, failed_steps);
    failed_steps := r.failed_steps;
    partitions_dropped := r.total;

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

-- Changes a collection's retention, previous images, TTL column or number
-- of ranges, while it runs.  New ranges move the logged changes and the
-- processors' checkpoints with them and fence running instances, under a
-- lock that holds writers off until commit (maintenance/ranges.sql).  (The key and the
-- partition key go with disable() and enable(): the logged changes were
-- placed in ranges by them.)
-- images changes what is logged from the next write on; the logged changes
-- stay as they are.  'full' -> 'keys' (with keep_previous => false, unless it
-- is false already): from the alter() on, the all-versions feed is refused
-- and the latest-version feed reads every change's document from the table,
-- the earlier ones included.  'keys' -> 'full': the changes logged while it
-- was 'keys' keep no images, so an all-versions read that meets one fails
-- with CF021 (read it in mode 'latest' past them, or resume from a position
-- taken after the alter()), and a latest-version read looks their current
-- rows up in the table.
CREATE OR REPLACE FUNCTION changefeed.alter(tbl regclass, retention interval DEFAULT NULL,
                                            keep_previous bool DEFAULT NULL, ttl_column text DEFAULT NULL,
                                            ranges int DEFAULT NULL, partition_drops text DEFAULT NULL,
                                            images text DEFAULT NULL)
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
    IF partition_drops IS NOT NULL THEN
        PERFORM changefeed.check_partition_drops(tbl, partition_drops);
    END IF;
    IF images IS NOT NULL OR keep_previous IS NOT NULL THEN
        PERFORM changefeed.check_images(tbl, coalesce(images, c.images), coalesce(keep_previous, c.keep_previous));
    END IF;
    IF ranges IS NOT NULL AND ranges <> c.ranges THEN
        c := changefeed.change_ranges(c, ranges);
    END IF;
    UPDATE changefeed.collection AS col
       SET retention = coalesce($2, col.retention),        -- retention
           keep_previous = coalesce($3, col.keep_previous),  -- keep_previous
           ttl_column = coalesce($4, col.ttl_column),        -- ttl_column
           partition_drops = coalesce($6, col.partition_drops),  -- partition_drops
           images = coalesce($7, col.images)                  -- images
     WHERE id = c.id
    RETURNING * INTO c;
    PERFORM changefeed.install_triggers(c);
END
$$;
