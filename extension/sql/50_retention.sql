-- changefeed: retention, history loss, TTL, changing options.
--
-- Retention drops whole daily partitions of changefeed.log (DROP TABLE, never
-- DELETE) once they are older than the longest retention of any collection.
-- Before dropping, it records per collection the newest transaction id in the
-- partition (one index descent per range, so the cost does not grow with the
-- number of rows) in changefeed.horizon.  A read whose position has not
-- delivered everything up to that id fails with CF006 (history lost).
--   CF006 history lost: retention dropped changes the position had not read

-- Whether everything up to and including transaction `upto` is visible in `lo`,
-- i.e. a reader at `lo` had already been delivered every dropped change.
CREATE FUNCTION changefeed.snapshot_covers(lo pg_snapshot, upto xid8) RETURNS bool
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT upto < pg_catalog.pg_snapshot_xmax(lo)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_snapshot_xip(lo) x WHERE x <= upto)
$$;

-- Raises CF006 when retention dropped changes that a reader at `lo` has not read.
CREATE FUNCTION changefeed.check_history(c changefeed.collection, lo pg_snapshot) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog AS $$
DECLARE
    h changefeed.horizon;
BEGIN
    SELECT * INTO h FROM changefeed.horizon WHERE collection_id = c.id;
    IF FOUND AND NOT changefeed.snapshot_covers(lo, h.dropped_txid) THEN
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

-- Moves a collection's horizon forward to cover transaction `upto`.
CREATE FUNCTION changefeed.raise_horizon(collection_id int, upto xid8, written_before timestamptz)
RETURNS void LANGUAGE sql SET search_path = pg_catalog AS $$
    INSERT INTO changefeed.horizon AS h (collection_id, dropped_txid, dropped_before)
    VALUES (collection_id, upto, written_before)
    ON CONFLICT (collection_id) DO UPDATE
       SET dropped_txid = greatest(h.dropped_txid, excluded.dropped_txid),
           dropped_before = greatest(h.dropped_before, excluded.dropped_before),
           dropped_at = now()
$$;

-- Records what dropping the partition `part` loses, per collection.
CREATE FUNCTION changefeed.record_horizon(part regclass, written_before timestamptz) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
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

-- Drops daily partitions wholly older than the longest retention.  `as_of`
-- lets tests and operators act as if it were later.  Returns how many it dropped.
CREATE FUNCTION changefeed.prune(as_of timestamptz DEFAULT now()) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    keep interval := coalesce((SELECT max(retention) FROM changefeed.collection), interval '7 days');
    cutoff timestamptz := as_of - keep;
    part record;
    upper_bound timestamptz;
    dropped int := 0;
BEGIN
    FOR part IN
        SELECT c.oid::regclass AS rel, c.relname
          FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'changefeed.log'::regclass AND c.relname ~ '^log_[0-9]{8}$'
         ORDER BY c.relname
    LOOP
        upper_bound := (to_date(substr(part.relname, 5), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC';
        EXIT WHEN upper_bound > cutoff;
        PERFORM changefeed.record_horizon(part.rel, upper_bound);
        EXECUTE format('DROP TABLE %s', part.rel);
        dropped := dropped + 1;
    END LOOP;
    -- Old rows in the default partition (only there when maintenance fell behind).
    IF EXISTS (SELECT 1 FROM changefeed.log_default WHERE written_at < cutoff) THEN
        PERFORM changefeed.raise_horizon(collection_id, max(txid), cutoff)
           FROM changefeed.log_default WHERE written_at < cutoff GROUP BY collection_id;
        DELETE FROM changefeed.log_default WHERE written_at < cutoff;
    END IF;
    -- Ticks older than every retention are of no use to any reader.
    DELETE FROM changefeed.tick WHERE at < cutoff;
    RETURN dropped;
END
$$;

-- Deletes rows whose TTL column has passed, marking their deletes as expiry.
CREATE FUNCTION changefeed.expire(as_of timestamptz DEFAULT now()) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    c changefeed.collection;
    n bigint;
    total bigint := 0;
BEGIN
    PERFORM set_config('changefeed.delete_reason', 'ttl', true);
    FOR c IN SELECT * FROM changefeed.collection WHERE ttl_column IS NOT NULL ORDER BY id LOOP
        EXECUTE format('DELETE FROM %s WHERE %I < $1', c.relid::regclass, c.ttl_column) USING as_of;
        GET DIAGNOSTICS n = ROW_COUNT;
        total := total + n;
    END LOOP;
    PERFORM set_config('changefeed.delete_reason', '', true);
    RETURN total;
END
$$;

-- Keeps the log ready: partitions ahead, retention, TTL.  Run by the
-- background worker when preloaded (changefeed.maintain_interval), by
-- processors now and then, or by cron:
--   SELECT cron.schedule('changefeed', '*/10 * * * *', 'SELECT changefeed.maintain()');
CREATE FUNCTION changefeed.maintain(as_of timestamptz DEFAULT now(),
    OUT partitions_created int, OUT partitions_dropped int, OUT ttl_deleted bigint)
LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    -- One maintainer at a time; others skip rather than queue.
    IF NOT pg_try_advisory_xact_lock(hashtext('changefeed.maintain')) THEN
        partitions_created := 0; partitions_dropped := 0; ttl_deleted := 0;
        RETURN;
    END IF;
    partitions_created := changefeed.create_partitions(7, as_of);
    partitions_dropped := changefeed.prune(as_of);
    ttl_deleted := changefeed.expire(as_of);
END
$$;

-- Changes a collection's retention or previous images.  (The ranges and the
-- partition key are fixed: changing them would move documents between ranges
-- under running consumers.)
CREATE FUNCTION changefeed.alter(tbl regclass, retention interval DEFAULT NULL,
                                 keep_previous bool DEFAULT NULL, ttl_column text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.require_table_owner(tbl, changefeed.caller(), 'alter the change feed of');
    IF retention IS NOT NULL AND retention <= interval '0' THEN
        RAISE EXCEPTION 'retention must be a positive interval, not %', retention USING ERRCODE = 'CF003';
    END IF;
    IF ttl_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[ttl_column], 'ttl');
        IF (SELECT atttypid FROM pg_attribute WHERE attrelid = tbl AND attname = ttl_column)
           NOT IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype) THEN
            RAISE EXCEPTION 'ttl column "%" must be a timestamptz, timestamp or date', ttl_column
                USING ERRCODE = 'CF003';
        END IF;
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
