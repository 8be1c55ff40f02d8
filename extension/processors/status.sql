-- changefeed: the status of every processor range, for monitoring
-- (docs/operations.md; docs/prometheus/queries.yaml scrapes it).
--
-- One row per collection, processor and range, from the lease rows plus a
-- lag estimate that stays cheap however far behind a range is: the changes
-- after the checkpoint are counted by index (the two scans read() makes: from
-- the checkpoint snapshot's xmax on, and its in-progress list), up to
-- `status_count_limit` (1000); lag_seconds is the age of the oldest of them
-- (written_at: its transaction's start).  Nothing is decoded but the
-- checkpoint; no change is read whole.
--
-- Who sees what: a row of a processor the caller owns (has its owning role's
-- privileges) or that runs on a table the caller owns; every row for members
-- of changefeed_admin and pg_monitor.  The
-- estimate counts changes, so it is shown only to a caller who may read the
-- feed (SELECT on the table, no row-level security in the way), or is an
-- admin or pg_monitor member; a caller bound to tenants counts only theirs
-- (a row that moved from one of them to another tenant counts: its delete).
-- Otherwise it is null.
--
-- The estimates cost two index scans per range, so they are bounded per
-- owner: the first `counted_per_owner` (1024) ranges of each owning role on
-- a collection, in processor and range order, get one; the rest null.  So a
-- role that claims many names (as many as changefeed.max_processors_per_role
-- lets it) slows the view by at most that many counts, whatever the names.
CREATE OR REPLACE FUNCTION changefeed.processor_status_rows()
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
    counted_per_owner constant int := 1024;
    who oid := changefeed.caller();
    sees_all bool := changefeed.is_admin(who) OR pg_has_role(who, 'pg_monitor', 'USAGE');
    bound text[] := changefeed.tenants_of(who);
    c changefeed.collection;
    h changefeed.horizon;
    l record;
    pos record;
    counts bool;
    owns_table bool;
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
        owns_table := pg_has_role(who, (SELECT k.relowner FROM pg_class k WHERE k.oid = c.relid), 'USAGE');
        SELECT * INTO h FROM changefeed.horizon x WHERE x.collection_id = c.id;
        FOR l IN
            SELECT x.processor, x.range_id, x.owner, x.epoch, hx.expires_at, x.updated_at, x.checkpoint,
                   x.backfill_done, p.owner_role,
                   row_number() OVER (PARTITION BY p.owner_role ORDER BY x.processor, x.range_id) AS owner_rank
              FROM changefeed.lease x
              LEFT JOIN changefeed.processor p ON p.collection_id = x.collection_id AND p.name = x.processor
              LEFT JOIN changefeed.holder hx ON hx.collection_id = x.collection_id AND hx.processor = x.processor
                                            AND hx.instance = x.owner
             WHERE x.collection_id = c.id
               AND (sees_all OR owns_table OR (p.owner_role IS NOT NULL
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
            IF counts AND l.owner_rank <= counted_per_owner THEN
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

-- The view changefeed.processor_status over it is created in
-- access/privileges.sql, once the entry point exists: a view made here would
-- call the implementation itself.
