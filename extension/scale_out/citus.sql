-- changefeed on a Citus cluster: capture on every shard placement.
--
-- A hash-distributed table's rows live in shards, each shard a table of one
-- worker (its placement).  enable() on the coordinator makes a collection
-- 'distributed' there, whose only trigger is the row capture trigger of the
-- table.  The table never holds a row on the coordinator, so the trigger
-- never fires there: Citus copies it to every shard placement, now and
-- whenever it makes one later (a move, a split, a new shard), after the
-- placement's data is loaded.  On the worker, the guard (guard/guard.sql)
-- turns that copy into a collection of the worker's own, 'shard', captured
-- into the worker's log with the options the trigger's arguments carry,
-- under triggers of its own named as Citus named the copy (capture_shard()).
--
-- A write is logged once, by the placement it was made on.  The data a move
-- or split copies is loaded before the trigger exists, and what the
-- catch-up of a logical-replication move or split applies to the new
-- placement, the subscription Citus made for it, is not captured again
-- (capture.cpp, applies_shard_transfer()).  Each placement's log ends where
-- the next begins (the cutover blocks writes), so a reader reads one
-- placement to its end, then the next (changefeed.shard_placement keeps the
-- order).
--
-- What is refused (CF027): reference tables (every node holds a placement, a
-- write would be logged once per node), Citus local tables and append- or
-- range-distributed tables.

-- Every shard placement a worker has captured, kept after Citus drops the
-- placement (a move or split drops the old one later) so that its log, which
-- retention keeps, can still be read to its end.  Dumped with the collections.
CREATE TABLE changefeed.shard_placement (
    collection_id   int PRIMARY KEY,
    shard_id        bigint NOT NULL,
    -- The distributed table and the placement's table, as named when made.
    table_name      text NOT NULL,
    placement_name  text NOT NULL,
    -- The placement's owner, and whether this node compared it with the
    -- table's then (not when the node had no copy of the table yet:
    -- collect() compares them when it first sees the placement).
    owner           name NOT NULL,
    owner_checked   bool NOT NULL,
    -- The coordinator's collection the trigger Citus copied named.
    coordinator_collection int NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    dropped_at      timestamptz
);
CREATE INDEX shard_placement_shard_idx ON changefeed.shard_placement (shard_id, created_at);
SELECT pg_catalog.pg_extension_config_dump('changefeed.shard_placement', '');

-- What kind of Citus table `tbl` is: 'hash', 'single shard', 'reference',
-- 'local', 'append' or 'range'; null when it is none (or Citus is not
-- installed).  Dynamic SQL: Citus's catalog exists only where it is.
CREATE OR REPLACE FUNCTION changefeed.citus_table_kind(tbl oid) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    method "char";
    model "char";
    colocation int;
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE 'SELECT partmethod, repmodel, colocationid FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1'
       INTO method, model, colocation USING tbl;
    RETURN CASE method
        WHEN 'h' THEN 'hash'
        WHEN 'a' THEN 'append'
        WHEN 'r' THEN 'range'
        WHEN 'n' THEN CASE WHEN model = 't' THEN 'reference' WHEN colocation <> 0 THEN 'single shard' ELSE 'local' END
    END;
END
$$;

-- Refuses (CF027) a Citus table enable() cannot capture exactly once, a
-- shard placement, and a distributed table anywhere but on the coordinator.
CREATE OR REPLACE FUNCTION changefeed.check_citus_table(tbl oid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kind text := changefeed.citus_table_kind(tbl);
    shard record := changefeed.citus_shard_of(tbl);
    coordinator bool;
BEGIN
    IF shard.shell IS NOT NULL THEN
        RAISE EXCEPTION 'table % cannot be enabled: it is shard % of the distributed table %',
                        tbl::regclass, shard.shard_id, shard.shell::regclass
            USING ERRCODE = 'CF027',
                  HINT = format('Enable the distributed table on the coordinator: SELECT changefeed.enable(%L);',
                                shard.shell::regclass::text);
    END IF;
    IF kind IS NULL THEN
        RETURN;
    END IF;
    EXECUTE 'SELECT pg_catalog.citus_is_coordinator()' INTO coordinator;
    IF NOT coordinator THEN
        RAISE EXCEPTION 'table % cannot be enabled on a worker', tbl::regclass
            USING ERRCODE = 'CF027',
                  DETAIL = 'Its shards are captured where they are once it is enabled on the coordinator.',
                  HINT = format('Run SELECT changefeed.enable(%L); on the coordinator.', tbl::regclass::text);
    END IF;
    IF kind IN ('hash', 'single shard') THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'table % cannot be enabled: it is a Citus % table', tbl::regclass, kind
        USING ERRCODE = 'CF027',
              DETAIL = CASE kind
                  WHEN 'reference' THEN 'Every node holds a placement of a reference table, so each write would be logged once per node.'
                  WHEN 'local' THEN 'A Citus local table keeps its rows in a shard of the coordinator that capture does not follow.'
                  ELSE 'Only hash-distributed tables are captured shard by shard.' END,
              HINT = CASE kind
                  WHEN 'reference' THEN format('Distribute it instead: SELECT create_distributed_table(%L, ''<column>'');', tbl::regclass::text)
                  WHEN 'local' THEN format('Undistribute it first: SELECT undistribute_table(%L);', tbl::regclass::text)
                  ELSE format('Redistribute it by hash: SELECT alter_distributed_table(%L, distribution_column => ''<column>'');',
                              tbl::regclass::text) END;
END
$$;

-- Lets this transaction make and drop triggers of Citus table `tbl`, which
-- Citus copies to the shards (or not: `allow` false gives the setting back).
-- Returns the setting before, for the second call; null for other tables.
CREATE OR REPLACE FUNCTION changefeed.citus_triggers(tbl oid, allow bool, before text DEFAULT NULL) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    was text;
BEGIN
    IF changefeed.citus_table_kind(tbl) IS NULL THEN
        RETURN NULL;
    END IF;
    IF allow THEN
        was := current_setting('citus.enable_unsafe_triggers');
        PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
        RETURN was;
    END IF;
    PERFORM set_config('citus.enable_unsafe_triggers', coalesce(before, 'off'), true);
    RETURN NULL;
END
$$;

-- The distributed table whose shard placement `rel` would be (its name, and
-- its oid when this node has its copy), and the shard's id, or nulls.  A
-- placement is named after its table with "_<shard id>", in the same schema;
-- its id may not be in Citus's catalog yet (a split creates its children's
-- triggers before their metadata), nor the table itself (a coordinator's
-- transaction that distributes and enables it).  Names come from the catalog
-- caches: a worker hides its placements from queries of pg_class.
CREATE OR REPLACE FUNCTION changefeed.citus_shard_of(rel oid, OUT table_name text, OUT shell oid, OUT shard_id bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    m text[];
    name text[];
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL OR rel IS NULL THEN
        RETURN;
    END IF;
    -- Qualified with the search_path pinned to pg_catalog: [schema, table].
    name := parse_ident(rel::regclass::text);
    m := regexp_match(name[cardinality(name)], '^(.+)_([0-9]{1,18})$');
    IF m IS NULL THEN
        RETURN;
    END IF;
    table_name := CASE WHEN cardinality(name) = 2 THEN quote_ident(name[1]) || '.' ELSE '' END || quote_ident(m[1]);
    shell := to_regclass(table_name);
    IF coalesce(changefeed.citus_table_kind(shell), 'hash') NOT IN ('hash', 'single shard') THEN
        table_name := NULL;
        shell := NULL;
        RETURN;
    END IF;
    shard_id := m[2]::bigint;
END
$$;

-- The arguments of a trigger, as text.
CREATE OR REPLACE FUNCTION changefeed.trigger_arguments(t pg_trigger) RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    rest bytea := t.tgargs;
    args text[] := '{}';
    at int;
BEGIN
    FOR n IN 1 .. t.tgnargs LOOP
        at := position('\x00'::bytea IN rest);
        args := args || convert_from(substring(rest FROM 1 FOR at - 1), getdatabaseencoding());
        rest := substring(rest FROM at + 1);
    END LOOP;
    RETURN args;
END
$$;

-- The guard's answer to a capture trigger `t` that names no collection of
-- this node and that Citus made: on a distributed table's shell (a worker's
-- copy of the table, which holds no rows), it stays; on a shard placement, the
-- placement becomes a collection of its own (below).  False when `t` is none
-- of these: the guard then refuses it.
CREATE OR REPLACE FUNCTION changefeed.citus_trigger(t pg_trigger) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    s record;
BEGIN
    IF t.tgfoid <> 'changefeed.capture_row()'::regprocedure OR t.tgname !~ '^changefeed_capture(_[0-9]+)?$'
       OR to_regclass('pg_catalog.pg_dist_partition') IS NULL
       OR EXISTS (SELECT 1 FROM changefeed.collection WHERE relid = t.tgrelid) THEN
        RETURN false;
    END IF;
    IF changefeed.citus_table_kind(t.tgrelid) IN ('hash', 'single shard') THEN
        RETURN true;
    END IF;
    s := changefeed.citus_shard_of(t.tgrelid);
    IF s.shard_id IS NULL THEN
        -- A node being added gets its copy of the table (which never holds a
        -- row there) before Citus records it as distributed.
        RETURN t.tgname = 'changefeed_capture' AND changefeed.from_citus()
               AND changefeed.citus_table_kind(t.tgrelid) IS NULL;
    END IF;
    -- Citus makes a placement as the table's owner.  Anyone else's table
    -- named like one must not add changes to the table's feed: where this node
    -- has no copy of the table yet (it is being distributed in the
    -- transaction that sends this), collect() compares the owners.
    IF t.tgname <> 'changefeed_capture_' || s.shard_id
       OR (s.shell IS NULL AND NOT changefeed.from_citus())
       OR (s.shell IS NOT NULL AND (SELECT relowner FROM pg_class WHERE oid = t.tgrelid)
                                   IS DISTINCT FROM (SELECT relowner FROM pg_class WHERE oid = s.shell)) THEN
        RETURN false;
    END IF;
    PERFORM changefeed.capture_shard(t, s.table_name, s.shard_id, s.shell IS NOT NULL);
    RETURN true;
END
$$;

-- Makes shard placement t.tgrelid of distributed table `table_name` a collection
-- of this node, with the options of the trigger Citus copied there
-- (capture_row_arguments(): id, ranges, images, replicated, keys, partition
-- key, tenant column), and replaces that trigger by the collection's own.
CREATE OR REPLACE FUNCTION changefeed.capture_shard(t pg_trigger, table_name text, shard bigint, owner_checked bool)
RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    a text[] := changefeed.trigger_arguments(t);
    nkeys int;
    npk int;
    c changefeed.collection;
BEGIN
    nkeys := a[5]::int;
    npk := a[6 + nkeys]::int;
    IF a[1] !~ '^[0-9]{1,9}$' OR cardinality(a) <> 6 + nkeys + npk + 1 THEN
        RAISE EXCEPTION 'trigger % on % does not carry a collection''s options', t.tgname, t.tgrelid::regclass
            USING ERRCODE = 'CF013', HINT = 'Capture triggers are made by changefeed.enable().';
    END IF;
    INSERT INTO changefeed.collection AS col
           (relid, key_columns, partition_key, ranges, keep_previous, tenant_column, replicated, images, citus)
    VALUES (t.tgrelid, a[6:5 + nkeys], a[7 + nkeys:6 + nkeys + npk], a[2]::int, a[3] = 't',
            nullif(a[7 + nkeys + npk], ''), a[4] = 't', CASE WHEN a[3] = 'k' THEN 'keys' ELSE 'full' END, 'shard')
    RETURNING * INTO c;
    INSERT INTO changefeed.shard_placement (collection_id, shard_id, table_name, placement_name, owner,
                                            owner_checked, coordinator_collection)
    VALUES (c.id, shard, table_name, t.tgrelid::regclass::text,
            (SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = t.tgrelid), owner_checked, a[1]::int);
    RETURN changefeed.start_capture(c);
END
$$;

-- Whether this backend runs a command Citus sent from another node (its
-- connections name themselves so): a DROP TRIGGER of a shard placement's
-- capture trigger comes from the coordinator's disable(), a capture trigger
-- on a table not yet distributed from the metadata sync of a node being
-- added.  Any session may name itself so: it passes only what the table's
-- owner may do anyway (disable() it; a trigger naming a collection this node
-- lacks refuses every write, capture.cpp).
CREATE OR REPLACE FUNCTION changefeed.from_citus() RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL
       AND current_setting('application_name') LIKE 'citus\_internal gpid=%'
$$;

-- Citus dropped the capture trigger of shard placement `c`: the coordinator
-- disabled the distributed table.  The placement's collection is forgotten
-- (a new one begins if the table is enabled again), its log kept.
CREATE OR REPLACE FUNCTION changefeed.forget_shard(c changefeed.collection) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM changefeed.drop_triggers(c.relid);
    DELETE FROM changefeed.collection WHERE id = c.id;
    UPDATE changefeed.shard_placement SET dropped_at = now() WHERE collection_id = c.id AND dropped_at IS NULL;
END
$$;
