-- changefeed on a Citus cluster: one feed for a distributed table, on the
-- coordinator.
--
-- Every shard placement logs its writes on its worker (citus.sql).
-- changefeed.collect(tbl) on the coordinator reads them there and appends
-- them to the coordinator's log under the distributed table's collection, in
-- its own transaction with what it has read of each placement: each change
-- once.  Processors, read() and everything else then read the table on the
-- coordinator as they read any table.
--
-- A placement is read in windows of commits, as read() reads a table: the
-- changes of the transactions that committed between two snapshots of its
-- worker, in the order of their seq, which is the order of commits for any
-- one row (a later write of a row waits for the earlier one's commit).
-- A shard's placements follow each other (a move or split blocks writes at
-- its cutover), so a placement is read only once those before it are read to
-- their end: the placements of the same shard made before it, and those of
-- the shards it was split from.  A placement ended when Citus dropped it, or
-- when the coordinator no longer lists it and every transaction its worker had
-- begun by then has ended (its end: that worker's xmax, taken after).

-- What collect() has read of each placement.  Not dumped: worker snapshots
-- mean nothing to another cluster.
CREATE TABLE changefeed.collected_placement (
    collection_id   int NOT NULL,      -- the coordinator's distributed table
    node_group      int NOT NULL,      -- the worker's group (pg_dist_node.groupid)
    placement       int NOT NULL,      -- the placement's collection on that worker
    shard_id        bigint NOT NULL,
    created_at      timestamptz NOT NULL,
    dropped         bool NOT NULL DEFAULT false,
    -- The window being read: changes of the transactions visible in `upto`
    -- and not in `since`, from after seq `after_seq` (upto null: the next
    -- window starts at `since`).
    since           pg_snapshot NOT NULL DEFAULT '1:1:',
    upto            pg_snapshot,
    after_seq       bigint NOT NULL DEFAULT 0,
    -- Set once the placement is no longer current: its worker's xmax then.
    end_at          xid8,
    done            bool NOT NULL DEFAULT false,
    collected       bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (collection_id, node_group, placement)
);

-- The hash range of every shard collect() has seen: a split's parent is gone
-- from Citus's catalog once its children are there.
CREATE TABLE changefeed.collected_shard (
    collection_id   int NOT NULL,
    shard_id        bigint NOT NULL,
    lo              bigint NOT NULL,
    hi              bigint NOT NULL,
    PRIMARY KEY (collection_id, shard_id)
);

-- Appends one change read from a placement to the coordinator's log
-- (collect.cpp).
CREATE OR REPLACE FUNCTION changefeed.append_change(collection_id int, range_id int, doc_id text, partition_key text,
                                                    op "char", current jsonb, previous jsonb, ttl_expired bool,
                                                    tenant text, previous_tenant text, previous_partition_key text)
RETURNS void AS 'MODULE_PATHNAME', 'changefeed_append_change' LANGUAGE C;

-- On a worker: the next changes of placement `placement` (a collection of
-- this node, its table there or dropped) in the window (since, upto], from
-- after seq `after_seq`, at most `max_changes`; upto null starts a window at
-- this statement's snapshot.  Returns {"upto", "rows": [[seq, range, doc id,
-- partition key, op, current, previous (as stored), ttl_expired, tenant,
-- previous tenant, previous partition key], ...], "last_seq", "exhausted",
-- "dropped", "xmax"}.  Schema changes are left out: the coordinator logs its
-- own.
CREATE OR REPLACE FUNCTION changefeed.placement_changes(placement int, since pg_snapshot, upto pg_snapshot,
                                                        after_seq bigint, max_changes int)
RETURNS jsonb LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    dropped bool;
    changes jsonb;
    n int;
BEGIN
    -- Before the window's snapshot: a drop seen here is in it.
    SELECT p.dropped_at IS NOT NULL INTO dropped FROM changefeed.shard_placement p WHERE p.collection_id = placement;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'collection % of this node is not a shard placement', placement USING ERRCODE = 'CF002';
    END IF;
    IF EXISTS (SELECT 1 FROM changefeed.horizon h
                WHERE h.collection_id = placement AND NOT changefeed.snapshot_covers(since, h.dropped_txid)) THEN
        RAISE EXCEPTION 'history lost: retention dropped changes of shard placement % that collect() had not read',
                        placement
            USING ERRCODE = 'CF006',
                  HINT = 'Run collect() well within the workers'' retention; rebuild the table''s consumers from the '
                         'table (docs/runbooks/history-lost.md).';
    END IF;
    upto := coalesce(upto, pg_current_snapshot());
    SELECT coalesce(jsonb_agg(jsonb_build_array(l.seq, l.range_id, l.doc_id, l.partition_key, l.op, l.current,
                                                l.previous, l.ttl_expired, l.tenant, l.previous_tenant,
                                                l.previous_partition_key) ORDER BY l.seq), '[]'),
           count(*)
      INTO changes, n
      FROM (SELECT * FROM changefeed.log l
             WHERE l.collection_id = placement AND l.txid >= pg_snapshot_xmin(since) AND l.seq > after_seq
               AND l.op <> 's' AND pg_visible_in_snapshot(l.txid, upto) AND NOT pg_visible_in_snapshot(l.txid, since)
             ORDER BY l.seq LIMIT max_changes) l;
    RETURN jsonb_build_object('upto', upto::text, 'rows', changes, 'last_seq', (changes -> -1 ->> 0)::bigint,
                              'exhausted', n < max_changes, 'dropped', dropped,
                              'xmax', pg_snapshot_xmax(pg_current_snapshot())::text);
END
$$;

-- Runs `command` on the node of group `node_group` (Citus's connections, as
-- the current user) and returns its one value.  CF028 when the node does not
-- answer or the command fails there; CF006 when it reports history lost.
CREATE OR REPLACE FUNCTION changefeed.on_node(node_group int, command text) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n record;
    r record;
BEGIN
    SELECT nodename, nodeport INTO n FROM pg_dist_node
     WHERE groupid = node_group AND noderole = 'primary' AND isactive;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no active primary node in group %', node_group USING ERRCODE = 'CF028';
    END IF;
    SELECT * INTO r FROM master_run_on_worker(ARRAY[n.nodename], ARRAY[n.nodeport], ARRAY[command], false);
    IF NOT r.success AND r.result LIKE 'history lost: %' THEN
        RAISE EXCEPTION '%', r.result
            USING ERRCODE = 'CF006', DETAIL = format('On the node %s:%s.', n.nodename, n.nodeport),
                  HINT = 'Rebuild the table''s consumers from the table (docs/runbooks/history-lost.md).';
    END IF;
    IF NOT r.success THEN
        RAISE EXCEPTION 'reading the node %:% failed: %', n.nodename, n.nodeport, r.result
            USING ERRCODE = 'CF028', HINT = 'collect() reads on where it stopped once the node answers.';
    END IF;
    RETURN r.result;
END
$$;

-- Records the hash ranges of the shards of distributed collection `c` as
-- Citus has them now (enable(), and every collect()): a shard split before
-- collect() saw it would leave its children waiting for every placement
-- made before them.
CREATE OR REPLACE FUNCTION changefeed.learn_shards(c changefeed.collection) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO changefeed.collected_shard (collection_id, shard_id, lo, hi)
    SELECT c.id, s.shardid, s.shardminvalue::bigint, s.shardmaxvalue::bigint
      FROM pg_dist_shard s WHERE s.logicalrelid = c.relid
    ON CONFLICT DO NOTHING;
END
$$;

-- Whether shard `a`'s hash range overlaps shard `b`'s (true when either is unknown).
CREATE OR REPLACE FUNCTION changefeed.shards_overlap(collection int, a bigint, b bigint) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT x.lo <= y.hi AND y.lo <= x.hi
                       FROM changefeed.collected_shard x, changefeed.collected_shard y
                      WHERE x.collection_id = collection AND x.shard_id = a
                        AND y.collection_id = collection AND y.shard_id = b), true)
$$;

-- Collects the changes of distributed table `tbl` its workers have logged
-- since the last call, at most about `max_changes`, into the coordinator's
-- log; returns how many.  Call it again while it returns max_changes or more;
-- a scheduler (pg_cron, or a loop in a service) calls it every second or so.
-- One call at a time per table (the collection's row is locked).
CREATE OR REPLACE FUNCTION changefeed.collect(tbl regclass, max_changes int DEFAULT 10000) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection;
    n record;
    r record;
    p changefeed.collected_placement;
    res jsonb;
    is_current bool;
    owner name;
    listed jsonb;
    got int;
    total int := 0;
BEGIN
    SELECT * INTO c FROM changefeed.collection x WHERE x.relid = tbl FOR UPDATE;
    IF NOT FOUND OR c.citus IS DISTINCT FROM 'distributed' THEN
        RAISE EXCEPTION 'table % is not a distributed table enabled for changefeed', tbl
            USING ERRCODE = 'CF002',
                  HINT = format('Enable it on the coordinator: SELECT changefeed.enable(%L);', tbl::text);
    END IF;
    IF max_changes IS NULL OR max_changes < 1 THEN
        RAISE EXCEPTION 'max_changes must be at least 1' USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.learn_shards(c);
    -- The placements every node has made of the table: as its owner, which
    -- the node compared then or this compares now (citus.sql: citus_trigger()).
    owner := (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = tbl);
    FOR n IN SELECT DISTINCT groupid FROM pg_dist_node WHERE noderole = 'primary' AND isactive ORDER BY 1 LOOP
        -- A node that does not answer is read again on the next call; the
        -- others go on (its placements, and those after them, wait).
        BEGIN
            listed := changefeed.on_node(n.groupid, format(
                'SELECT coalesce(jsonb_agg(jsonb_build_array(collection_id, shard_id, created_at, '
                'dropped_at IS NOT NULL, owner_checked OR owner = %L)), ''[]'') FROM changefeed.shard_placement '
                'WHERE coordinator_collection = %s AND table_name = %L',
                owner, c.id, tbl::text))::jsonb;
        EXCEPTION WHEN SQLSTATE 'CF028' THEN
            RAISE WARNING '%', SQLERRM USING ERRCODE = 'CF028';
            CONTINUE;
        END;
        FOR r IN SELECT (e ->> 0)::int AS placement, (e ->> 1)::bigint AS shard_id, (e ->> 2)::timestamptz AS created_at,
                        (e ->> 3)::bool AS dropped, (e ->> 4)::bool AS owners
                   FROM jsonb_array_elements(listed) e LOOP
            UPDATE changefeed.collected_placement x SET dropped = r.dropped
             WHERE x.collection_id = c.id AND x.node_group = n.groupid AND x.placement = r.placement
               AND x.dropped IS DISTINCT FROM r.dropped;
            CONTINUE WHEN NOT r.owners;
            INSERT INTO changefeed.collected_placement (collection_id, node_group, placement, shard_id, created_at, dropped)
            VALUES (c.id, n.groupid, r.placement, r.shard_id, r.created_at, r.dropped)
            ON CONFLICT DO NOTHING;
        END LOOP;
    END LOOP;

    FOR p IN SELECT * FROM changefeed.collected_placement x
              WHERE x.collection_id = c.id AND NOT x.done ORDER BY x.created_at, x.node_group, x.placement LOOP
        EXIT WHEN total >= max_changes;
        -- Read only once every placement made before it of its shard, or of
        -- a shard whose range overlaps its own (it was split from that one;
        -- live shards never overlap), is read to its end.  A split's
        -- children, made before the split's cutover, wait for it so.
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM changefeed.collected_placement q
             WHERE q.collection_id = c.id AND NOT q.done AND q.created_at < p.created_at
               AND (q.shard_id = p.shard_id OR changefeed.shards_overlap(c.id, q.shard_id, p.shard_id)));
        -- Current: Citus has the shard there now.  A move or split changes
        -- that at its cutover, which blocks writes, and not before: its new
        -- placement exists, and its logical catch-up runs, well before.
        is_current := NOT p.dropped
            AND EXISTS (SELECT 1 FROM pg_dist_placement pl WHERE pl.shardid = p.shard_id AND pl.groupid = p.node_group);
        BEGIN
            res := changefeed.on_node(p.node_group, format(
                       'SELECT changefeed.placement_changes(%s, %L, %L, %s, %s)',
                       p.placement, p.since, p.upto, p.after_seq, max_changes - total))::jsonb;
        EXCEPTION WHEN SQLSTATE 'CF028' THEN
            RAISE WARNING '%', SQLERRM USING ERRCODE = 'CF028';
            CONTINUE;
        END;
        -- One statement for the page, appended in the page's order (the
        -- order jsonb_array_elements() returns the rows in).
        SELECT count(changefeed.append_change(c.id, (ch ->> 1)::int, ch ->> 2, ch ->> 3, (ch ->> 4)::"char",
                                              ch -> 5, nullif(ch -> 6, 'null'::jsonb), (ch ->> 7)::bool, ch ->> 8,
                                              ch ->> 9, ch ->> 10))
          INTO got FROM jsonb_array_elements(res -> 'rows') e(ch);
        IF NOT is_current AND p.end_at IS NULL THEN
            p.end_at := (res ->> 'xmax')::xid8;
        END IF;
        IF (res ->> 'exhausted')::bool THEN
            p.since := (res ->> 'upto')::pg_snapshot;
            p.upto := NULL;
            p.after_seq := 0;
            p.done := (res ->> 'dropped')::bool
                      OR (p.end_at IS NOT NULL AND pg_snapshot_xmin(p.since) >= p.end_at);
        ELSE
            p.upto := (res ->> 'upto')::pg_snapshot;
            p.after_seq := (res ->> 'last_seq')::bigint;
        END IF;
        UPDATE changefeed.collected_placement x
           SET since = p.since, upto = p.upto, after_seq = p.after_seq, end_at = p.end_at, done = p.done,
               collected = x.collected + got
         WHERE x.collection_id = c.id AND x.node_group = p.node_group AND x.placement = p.placement;
        total := total + got;
    END LOOP;
    RETURN total;
END
$$;
