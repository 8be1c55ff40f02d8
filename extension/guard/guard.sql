-- changefeed: the capture guard and verify().
--
-- A write that misses the feed without an error is the worst bug this product
-- can have.  While a table is enabled, every DDL that would let writes escape
-- capture is refused with CF013 (the way out is changefeed.disable()):
-- disabling, dropping, renaming or replacing the capture triggers; dropping,
-- retyping or renaming the key, partition-key, tenant or TTL columns; a
-- primary key other than the collection's key; inheritance children;
-- DETACH PARTITION, DROP or TRUNCATE of a partition (DROP and DETACH go
-- through when the collection's partition_drops is 'expire' or 'forget':
-- partition_drops.cpp).  Partitions created or
-- attached later get their TRUNCATE guard here.  verify() reports, per enabled
-- table, whatever is not intact (both use capture_problems()).
--
-- The guard runs on everyone's DDL in the whole database: it reads only the
-- catalog (and installs a partition's TRUNCATE guard), exits early when no
-- enabled table is involved, and ignores temporary objects.
--
-- A restore (pg_restore) loads the collection rows before the primary keys
-- and triggers of the tables, and creates the capture triggers one statement
-- at a time.  So what is absent is not refused here (only verify() reports
-- it): removals are caught where they happen (sql_drop), and only what is
-- present and wrong is refused at ddl_command_end.

-- Suspends the guard in this backend while the extension runs its own DDL;
-- returns the previous setting.  Reset at transaction end and on abort.
CREATE OR REPLACE FUNCTION changefeed.suspend_guard(suspend bool) RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_suspend_guard' LANGUAGE C STRICT;
CREATE OR REPLACE FUNCTION changefeed.guard_suspended() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_guard_suspended' LANGUAGE C;

-- BEFORE TRUNCATE FOR EACH STATEMENT on the root ('root') and on every
-- partition ('partition') of an enabled partitioned table: a TRUNCATE of the
-- root passes (its capture trigger logs the clear), one of a partition alone
-- is refused.  Arguments: collection id, 'root' or 'partition'.
CREATE OR REPLACE FUNCTION changefeed.guard_truncate() RETURNS trigger
    AS 'MODULE_PATHNAME', 'changefeed_guard_truncate' LANGUAGE C;

-- Facts of a DDL command that its result does not show.
CREATE OR REPLACE FUNCTION changefeed.attaches_partition(cmd pg_ddl_command) RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_attaches_partition' LANGUAGE C STRICT;
CREATE OR REPLACE FUNCTION changefeed.replaces_trigger(cmd pg_ddl_command) RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_replaces_trigger' LANGUAGE C STRICT;
-- Whether an ALTER TYPE renamed a value of an enum (RENAME VALUE).
CREATE OR REPLACE FUNCTION changefeed.renames_enum_value(cmd pg_ddl_command) RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_renames_enum_value' LANGUAGE C STRICT;

-- Whether any table of the database has a capture trigger: the guards' first,
-- cheap question, answered from the system catalog alone, so that DDL in a
-- database with no enabled table never even locks changefeed.collection.
CREATE OR REPLACE FUNCTION changefeed.any_capture_trigger() RETURNS bool
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger
                    WHERE tgfoid = 'changefeed.capture_row()'::pg_catalog.regprocedure)
$$;

-- The enabled tables at or above `rel` in its inheritance/partition tree
-- (not those disabled with their state kept: they capture nothing).
CREATE OR REPLACE FUNCTION changefeed.enabled_above(rel oid) RETURNS SETOF changefeed.collection
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE up(oid) AS (
        SELECT rel
        UNION
        SELECT i.inhparent FROM pg_catalog.pg_inherits i JOIN up ON i.inhrelid = up.oid)
    SELECT c.* FROM changefeed.collection c
     WHERE c.relid IN (SELECT oid FROM up) AND c.disabled_at IS NULL ORDER BY c.id
$$;

-- The table and all its partitions (any depth).
CREATE OR REPLACE FUNCTION changefeed.tree_of(tbl oid) RETURNS SETOF oid
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT tbl
    UNION
    SELECT t.relid::oid FROM pg_catalog.pg_partition_tree(tbl) t
$$;

-- The columns capture depends on: key, partition key, tenant, TTL.
CREATE OR REPLACE FUNCTION changefeed.watched_columns(c changefeed.collection) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT array_agg(DISTINCT col ORDER BY col)
      FROM unnest(c.key_columns || c.partition_key || ARRAY[c.tenant_column, c.ttl_column]) col
     WHERE col IS NOT NULL
$$;

CREATE OR REPLACE FUNCTION changefeed.column_types_of(c changefeed.collection) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(jsonb_object_agg(a.attname, format_type(a.atttypid, a.atttypmod)), '{}')
      FROM pg_attribute a
     WHERE a.attrelid = c.relid AND a.attnum > 0 AND NOT a.attisdropped
       AND a.attname = ANY (changefeed.watched_columns(c))
$$;

-- Trigger arguments (see capture_row/capture_truncate in capture/enable.sql).
CREATE OR REPLACE FUNCTION changefeed.capture_row_arguments(c changefeed.collection) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT ARRAY[c.id::text, c.ranges::text,
                 CASE WHEN c.images = 'keys' THEN 'k' WHEN c.keep_previous THEN 't' ELSE 'f' END,
                 CASE WHEN c.replicated THEN 't' ELSE 'f' END,
                 cardinality(c.key_columns)::text]
           || c.key_columns || cardinality(c.partition_key)::text || c.partition_key
           || coalesce(c.tenant_column, '')
$$;

CREATE OR REPLACE FUNCTION changefeed.capture_truncate_arguments(c changefeed.collection) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT ARRAY[c.id::text, c.ranges::text, CASE WHEN c.replicated THEN 't' ELSE 'f' END]
$$;

-- Arguments as a CREATE TRIGGER argument list, and as pg_trigger.tgargs holds them.
CREATE OR REPLACE FUNCTION changefeed.trigger_arguments_sql(args text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT string_agg(quote_literal(a), ', ' ORDER BY o) FROM unnest(args) WITH ORDINALITY u(a, o)
$$;

CREATE OR REPLACE FUNCTION changefeed.trigger_arguments_bytes(args text[]) RETURNS bytea
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(string_agg(convert_to(a, getdatabaseencoding()) || '\x00'::bytea, ''::bytea ORDER BY o),
                    ''::bytea)
      FROM unnest(args) WITH ORDINALITY u(a, o)
$$;

CREATE OR REPLACE FUNCTION changefeed.truncate_guard_name(c changefeed.collection) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$ SELECT 'changefeed_truncate_guard_' || c.id::text $$;

-- The names of a collection's capture triggers.  Citus names its copy of a
-- trigger on a shard placement after the shard (scale_out/citus.sql), and the
-- placement's own keep that name.
CREATE OR REPLACE FUNCTION changefeed.capture_trigger_name(c changefeed.collection, truncate bool DEFAULT false)
RETURNS text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN truncate THEN 'changefeed_capture_truncate' ELSE 'changefeed_capture' END
           || coalesce((SELECT '_' || p.shard_id FROM changefeed.shard_placement p
                         WHERE p.collection_id = c.id AND c.citus = 'shard'), '')
$$;

-- Whether a trigger is one capture depends on, or pretends to be: by name or by function.
CREATE OR REPLACE FUNCTION changefeed.is_capture_trigger(name name, func oid) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT name ~ '^changefeed_capture(_truncate)?(_[0-9]+)?$'
        OR name LIKE 'changefeed\_truncate\_guard\_%'
        OR func IN ('changefeed.capture_row()'::regprocedure, 'changefeed.capture_truncate()'::regprocedure,
                    'changefeed.guard_truncate()'::regprocedure)
$$;

-- Why a trigger that runs one of capture's functions is not on the tree of
-- the collection its first argument names, or null.  Any role may hold a
-- clone of capture_row() (capture/enable.sql), so one made on a role's own table
-- naming another collection would file changes under it.
CREATE OR REPLACE FUNCTION changefeed.foreign_trigger_problem(t pg_trigger) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    first text;
    table_of oid;
BEGIN
    IF t.tgfoid NOT IN ('changefeed.capture_row()'::regprocedure, 'changefeed.capture_truncate()'::regprocedure,
                        'changefeed.guard_truncate()'::regprocedure) THEN
        RETURN NULL;
    END IF;
    IF t.tgnargs > 0 THEN
        first := convert_from(substring(t.tgargs FROM 1 FOR position('\x00'::bytea IN t.tgargs) - 1),
                              getdatabaseencoding());
    END IF;
    IF first ~ '^[0-9]{1,9}$' THEN
        SELECT x.relid INTO table_of FROM changefeed.collection x WHERE x.id = first::int;
        IF t.tgrelid IN (SELECT changefeed.tree_of(table_of)) THEN
            RETURN NULL;
        END IF;
    END IF;
    RETURN format('trigger %I on %s runs %s for collection %s, which captures another table',
                  t.tgname, t.tgrelid::regclass, t.tgfoid::regprocedure, coalesce(first, '(none)'));
END
$$;

-- What is wrong with one trigger of an enabled table's tree, or null.
-- `created`: it was just created (a restore enables it ALWAYS by the next statement).
CREATE OR REPLACE FUNCTION changefeed.trigger_problem(trigger_oid oid, c changefeed.collection, created bool DEFAULT false)
RETURNS text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t pg_trigger;
    on_root bool;
    func regprocedure;
    events int;
    args text[];
    what text;
BEGIN
    SELECT * INTO t FROM pg_trigger WHERE oid = trigger_oid;
    IF NOT FOUND THEN RETURN NULL; END IF;
    on_root := t.tgrelid = c.relid;
    what := format('trigger %I on %s', t.tgname, t.tgrelid::regclass);
    IF t.tgname = changefeed.capture_trigger_name(c) THEN
        func := 'changefeed.capture_row()'; events := 29;  -- AFTER ROW INSERT|DELETE|UPDATE
        args := changefeed.capture_row_arguments(c);
    ELSIF t.tgname = changefeed.capture_trigger_name(c, truncate => true) AND on_root THEN
        func := 'changefeed.capture_truncate()'; events := 32;  -- AFTER STATEMENT TRUNCATE
        args := changefeed.capture_truncate_arguments(c);
    ELSIF t.tgname = changefeed.truncate_guard_name(c) THEN
        func := 'changefeed.guard_truncate()'; events := 34;  -- BEFORE STATEMENT TRUNCATE
        args := ARRAY[c.id::text, CASE WHEN on_root THEN 'root' ELSE 'partition' END];
    ELSE
        RETURN what || format(' is not a capture trigger of collection %s but is named or runs like one (%s)',
                              c.id, t.tgfoid::regprocedure);
    END IF;
    IF t.tgfoid <> func THEN
        RETURN format('%s runs %s instead of %s', what, t.tgfoid::regprocedure, func);
    END IF;
    IF t.tgtype <> events OR t.tgqual IS NOT NULL OR cardinality(t.tgattr::int2[]) > 0 THEN
        RETURN what || ' fires on other events or conditions than capture needs';
    END IF;
    IF t.tgargs <> changefeed.trigger_arguments_bytes(args) THEN
        RETURN what || ' has other arguments than the collection''s';
    END IF;
    IF t.tgenabled <> 'A' AND NOT created THEN
        RETURN what || CASE t.tgenabled WHEN 'D' THEN ' is disabled'
                                        WHEN 'R' THEN ' fires only in replica mode'
                                        ELSE ' does not fire in replica mode (not ENABLE ALWAYS)' END;
    END IF;
    RETURN NULL;
END
$$;

-- ---- PostgreSQL 18: virtual generated columns ----
-- A virtual generated column (18 and newer) is computed when read: a row
-- trigger sees it as null, so capture cannot log it.  enable() refuses such a
-- table, and the guard an ALTER TABLE that adds one (via shape_problems()).
CREATE OR REPLACE FUNCTION changefeed.virtual_column_problems(tbl oid) RETURNS SETOF text
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT format('column %I of %s is a virtual generated column, which a row trigger sees as null (make it STORED)',
                  a.attname, a.attrelid::regclass)
      FROM pg_attribute a
     WHERE a.attrelid IN (SELECT changefeed.tree_of(tbl)) AND a.attnum > 0 AND NOT a.attisdropped
       AND a.attgenerated = 'v'
     ORDER BY a.attrelid, a.attnum
$$;
-- ---- end of virtual generated columns ----

-- Shapes of a table whose writes could escape capture: being a partition or
-- an inheritance child, having inheritance children (its own or its
-- partitions'), foreign partitions (written elsewhere), enabled partitions, virtual
-- generated columns, unlogged tables (crash recovery empties them, and a
-- standby has none of their rows, without a change in the feed).
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
        UNION ALL
        SELECT 6, format('%s is unlogged: a crash empties it without a change in the feed', r.oid::regclass)
          FROM pg_class r WHERE r.oid IN (SELECT changefeed.tree_of(tbl)) AND r.relpersistence = 'u'
    ) problems(n, p)
$$;

-- Everything that is not intact about a collection's capture.  `complete`
-- (verify) also reports what is absent; the guard (complete => false) reports
-- only what is present and wrong (see the header about restores).
CREATE OR REPLACE FUNCTION changefeed.capture_problems(c changefeed.collection, complete bool DEFAULT true)
RETURNS text[] LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl oid := c.relid;
    kind "char";
    p text[];
    col text;
    recorded text;
    actual text;
    pk text[];
    rel oid;
    t record;
    q text;
    guard_name text := changefeed.truncate_guard_name(c);
BEGIN
    SELECT relkind INTO kind FROM pg_class WHERE oid = tbl;
    IF NOT FOUND THEN
        RETURN ARRAY[format('table %s does not exist', tbl)];
    END IF;
    p := changefeed.shape_problems(tbl);

    FOREACH col IN ARRAY changefeed.watched_columns(c) LOOP
        recorded := c.column_types ->> col;
        SELECT format_type(atttypid, atttypmod) INTO actual FROM pg_attribute
         WHERE attrelid = tbl AND attname = col AND attnum > 0 AND NOT attisdropped;
        IF NOT FOUND THEN
            p := p || format('column %I is missing (dropped or renamed)', col);
        ELSIF recorded IS NOT NULL AND actual <> recorded THEN
            p := p || format('column %I is %s, not %s as when enabled', col, actual, recorded);
        END IF;
    END LOOP;

    SELECT array_agg(a.attname::text ORDER BY a.attname) INTO pk
      FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
     WHERE i.indrelid = tbl AND i.indisprimary;
    IF pk IS NULL THEN
        IF complete THEN
            p := p || 'the table has no primary key'::text;
        END IF;
    ELSIF pk <> (SELECT array_agg(k ORDER BY k) FROM unnest(c.key_columns) k) THEN
        p := p || format('the primary key is (%s), not the collection''s key (%s)',
                         array_to_string(pk, ', '), array_to_string(c.key_columns, ', '));
    END IF;

    -- Triggers that are ours by name or function, wherever in the tree.
    FOR t IN SELECT g.oid FROM pg_trigger g
              WHERE g.tgrelid IN (SELECT changefeed.tree_of(tbl))
                AND changefeed.is_capture_trigger(g.tgname, g.tgfoid)
              ORDER BY g.tgrelid, g.tgname LOOP
        q := changefeed.trigger_problem(t.oid, c);
        IF q IS NOT NULL THEN p := p || q; END IF;
    END LOOP;

    IF complete THEN
        FOR rel IN SELECT changefeed.tree_of(tbl) ORDER BY 1 LOOP
            FOREACH q IN ARRAY ARRAY[changefeed.capture_trigger_name(c)]
                               || CASE WHEN rel = tbl AND c.citus IS DISTINCT FROM 'distributed'
                                       THEN ARRAY[changefeed.capture_trigger_name(c, truncate => true)] ELSE '{}' END
                               || CASE WHEN kind = 'p' THEN ARRAY[guard_name] ELSE '{}' END LOOP
                IF NOT EXISTS (SELECT 1 FROM pg_trigger g WHERE g.tgrelid = rel AND g.tgname = q) THEN
                    p := p || format('trigger %I on %s is missing', q, rel::regclass);
                END IF;
            END LOOP;
        END LOOP;
    END IF;

    -- A partition that left the tree still carries its TRUNCATE guard.
    IF kind = 'p' THEN
        FOR rel IN SELECT g.tgrelid FROM pg_trigger g
                    WHERE g.tgname = guard_name AND g.tgrelid NOT IN (SELECT changefeed.tree_of(tbl)) LOOP
            p := p || format('%s was detached from the table', rel::regclass);
        END LOOP;
    END IF;
    RETURN p;
END
$$;

-- Installs the TRUNCATE guard on the root or a partition of an enabled
-- partitioned table, unless it is there.  Foreign tables cannot have one
-- (capture_problems() refuses them as partitions).
CREATE OR REPLACE FUNCTION changefeed.install_truncate_guard(c changefeed.collection, rel oid) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    name text := changefeed.truncate_guard_name(c);
    was_suspended bool;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = rel AND tgname = name)
       OR (SELECT relkind FROM pg_class WHERE oid = rel) NOT IN ('r', 'p') THEN
        RETURN;
    END IF;
    was_suspended := changefeed.suspend_guard(true);
    EXECUTE format('CREATE TRIGGER %I BEFORE TRUNCATE ON %s FOR EACH STATEMENT '
                   'EXECUTE FUNCTION changefeed.guard_truncate(%L, %L)',
                   name, rel::regclass, c.id, CASE WHEN rel = c.relid THEN 'root' ELSE 'partition' END);
    EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', rel::regclass, name);
    PERFORM changefeed.suspend_guard(was_suspended);
END
$$;

-- Refuses `command` (CF013) when it leaves `problems` in the capture of `c`.
CREATE OR REPLACE FUNCTION changefeed.refuse_hole(command text, c changefeed.collection, problems text[]) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF coalesce(cardinality(problems), 0) = 0 THEN
        RETURN;
    END IF;
    RAISE EXCEPTION '% refused: it would let writes to % escape capture', command, c.relid::regclass
        USING ERRCODE = 'CF013',
              DETAIL = format('%s is enabled for changefeed (collection %s): %s.',
                              c.relid::regclass, c.id, array_to_string(problems, '; ')),
              HINT = format('To change the table this way, disable capture first: SELECT changefeed.disable(%L);',
                            c.relid::regclass::text);
END
$$;

-- Whether any plain table of the tree under `rel` holds a row (read as the
-- extension's owner: no policy or user function runs).
CREATE OR REPLACE FUNCTION changefeed.holds_rows(rel oid) RETURNS bool
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t oid;
    found_row bool;
BEGIN
    FOR t IN SELECT x FROM changefeed.tree_of(rel) x
              WHERE (SELECT relkind FROM pg_class WHERE oid = x) = 'r' LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM ONLY %s)', t::regclass) INTO found_row;
        IF found_row THEN
            RETURN true;
        END IF;
    END LOOP;
    RETURN false;
END
$$;

-- ddl_command_end: refuses what would leave capture with a hole; installs the
-- TRUNCATE guard of partitions created or attached under an enabled table.
CREATE OR REPLACE FUNCTION changefeed.guard_ddl() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cmd record;
    rel oid;
    rels oid[];
    c changefeed.collection;
    checked int[] := '{}';
    added bool;
    q text;
    t pg_trigger;
BEGIN
    IF changefeed.guard_suspended() OR NOT changefeed.any_capture_trigger() THEN
        RETURN;
    END IF;
    FOR cmd IN SELECT * FROM pg_event_trigger_ddl_commands()
                WHERE classid IN ('pg_class'::regclass, 'pg_trigger'::regclass)
                  AND schema_name IS DISTINCT FROM 'pg_temp' LOOP
        IF cmd.classid = 'pg_trigger'::regclass THEN
            SELECT * INTO t FROM pg_trigger WHERE oid = cmd.objid;
            CONTINUE WHEN NOT FOUND OR NOT changefeed.is_capture_trigger(t.tgname, t.tgfoid);
            -- Citus's copy of a distributed table's trigger (scale_out/citus.sql).
            CONTINUE WHEN cmd.command_tag = 'CREATE TRIGGER' AND changefeed.citus_trigger(t);
            FOR c IN SELECT * FROM changefeed.enabled_above(t.tgrelid) LOOP
                IF cmd.command_tag = 'CREATE TRIGGER' AND changefeed.replaces_trigger(cmd.command) THEN
                    PERFORM changefeed.refuse_hole('CREATE OR REPLACE TRIGGER', c,
                        ARRAY[format('it replaces trigger %I on %s', t.tgname, t.tgrelid::regclass)]);
                END IF;
                q := changefeed.trigger_problem(t.oid, c, created => cmd.command_tag = 'CREATE TRIGGER');
                IF q IS NOT NULL THEN
                    PERFORM changefeed.refuse_hole(cmd.command_tag, c, ARRAY[q]);
                END IF;
            END LOOP;
            -- Anywhere else: only on the tree of the collection it names.
            q := changefeed.foreign_trigger_problem(t);
            IF q IS NOT NULL THEN
                RAISE EXCEPTION '% refused: %', cmd.command_tag, q
                    USING ERRCODE = 'CF013', HINT = 'Capture triggers are made by changefeed.enable().';
            END IF;
            CONTINUE;
        END IF;
        -- ATTACH PARTITION: the whole tree under the ALTER TABLE's target
        -- (an enabled table may also have been attached as a partition).
        added := cmd.command_tag = 'CREATE TABLE'
                 OR (cmd.command_tag IN ('ALTER TABLE', 'ALTER FOREIGN TABLE')
                     AND changefeed.attaches_partition(cmd.command));
        rels := CASE WHEN added AND cmd.command_tag <> 'CREATE TABLE'
                     THEN ARRAY(SELECT changefeed.tree_of(cmd.objid)) ELSE ARRAY[cmd.objid] END;
        FOREACH rel IN ARRAY rels LOOP
            FOR c IN SELECT * FROM changefeed.enabled_above(rel) LOOP
                -- A table just attached (no TRUNCATE guard yet) must be empty: its
                -- rows would join the enabled table without a change.
                IF added AND c.relid <> rel AND cmd.command_tag <> 'CREATE TABLE'
                   AND NOT EXISTS (SELECT 1 FROM pg_trigger
                                    WHERE tgrelid = rel AND tgname = changefeed.truncate_guard_name(c))
                   AND changefeed.holds_rows(rel) THEN
                    PERFORM changefeed.refuse_hole('ATTACH PARTITION', c,
                        ARRAY[format('%s holds rows that would join %s without a change (attach it empty, then insert its rows)',
                                     rel::regclass, c.relid)]);
                END IF;
                -- A partition created or attached under an installed enabled table gets its TRUNCATE guard.
                IF added AND c.relid <> rel
                   AND EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = c.relid AND tgname = 'changefeed_capture')
                   AND (SELECT relkind FROM pg_class WHERE oid = c.relid) = 'p' THEN
                    PERFORM changefeed.install_truncate_guard(c, rel);
                END IF;
                checked := checked || c.id;
            END LOOP;
        END LOOP;
    END LOOP;
    FOR c IN SELECT * FROM changefeed.collection WHERE id = ANY (checked) ORDER BY id LOOP
        PERFORM changefeed.refuse_hole(tg_tag, c, changefeed.capture_problems(c, complete => false));
        -- A command that changed the columns makes a new schema version,
        -- in the feed in order with the data (27_schema.sql).
        IF c.disabled_at IS NULL THEN
            PERFORM changefeed.record_schema(c);
        END IF;
    END LOOP;
END
$$;

-- sql_drop: refuses dropping a capture trigger or TRUNCATE guard (which is
-- also how DROP of a partition shows: its guard goes with it), the primary
-- key, or a watched column (also by DROP TYPE ... CASCADE) of an enabled table.
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
            -- A dropped partition: forgotten, or expired at ddl_command_start.
            CONTINUE WHEN FOUND AND rel IS NULL
                AND (c.partition_drops = 'forget'
                     OR (c.partition_drops = 'expire' AND changefeed.partition_expired(
                            (SELECT o.objid FROM pg_event_trigger_dropped_objects() o
                              WHERE o.object_type = 'table' AND o.address_names = d.address_names[1:2]))));
            IF FOUND THEN
                PERFORM changefeed.refuse_hole(tg_tag, c, ARRAY[CASE
                    WHEN rel IS NOT NULL THEN format('trigger %s would be dropped', d.object_identity)
                    WHEN c.partition_drops = 'expire'
                    THEN format('partition %I.%I would be dropped without its rows logged as expired '
                                '(drop partitions with DROP TABLE or DETACH PARTITION)',
                                d.address_names[1], d.address_names[2])
                    ELSE format('partition %I.%I would be dropped', d.address_names[1], d.address_names[2]) END]);
            END IF;
        ELSIF d.object_type = 'trigger' AND rel IS NOT NULL
              AND d.address_names[3] ~ '^changefeed_capture(_truncate)?(_[0-9]+)?$' THEN
            FOR c IN SELECT * FROM changefeed.enabled_above(rel) LOOP
                -- The coordinator's disable() of a distributed table, on one of its shards.
                IF c.citus = 'shard' AND changefeed.from_citus() THEN
                    PERFORM changefeed.forget_shard(c);
                    CONTINUE;
                END IF;
                PERFORM changefeed.refuse_hole(tg_tag, c, ARRAY[format('trigger %s would be dropped', d.object_identity)]);
            END LOOP;
        ELSIF d.object_type IN ('table constraint', 'table column') AND rel IS NOT NULL THEN
            FOR c IN SELECT * FROM changefeed.collection x WHERE x.relid = rel AND x.disabled_at IS NULL LOOP
                problems := changefeed.capture_problems(c, complete => false);
                IF NOT EXISTS (SELECT 1 FROM pg_index WHERE indrelid = rel AND indisprimary) THEN
                    problems := problems || 'the primary key would be dropped'::text;
                END IF;
                PERFORM changefeed.refuse_hole(tg_tag, c, problems);
            END LOOP;
        END IF;
    END LOOP;
END
$$;

-- ddl_command_start on ALTER TABLE: refuses DETACH PARTITION (C: it reads the
-- parse tree; CONCURRENTLY commits its first step before ddl_command_end),
-- SET EXPRESSION and an ALTER COLUMN ... TYPE that changes stored values
-- (rewrites.cpp; the old type and the USING expression are known only here).
-- Not SECURITY DEFINER, and its search_path not pinned: it resolves the
-- table and type names as the role whose command it is, with that role's
-- search_path (a definer's "$user" would be the definer), and reads the
-- catalog as the catalog's owner only then (guard.cpp).
CREATE OR REPLACE FUNCTION changefeed.guard_detach() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'changefeed_guard_detach' LANGUAGE C;

-- table_rewrite: the backstop of the above.  A rewrite of an enabled table or
-- of one of its partitions that writes computed values into its rows (a
-- column added with a volatile default, as serial, identity or stored
-- generated column; a type change not approved at ddl_command_start) is
-- refused; one that copies them (SET LOGGED/UNLOGGED, SET ACCESS METHOD)
-- passes.
CREATE OR REPLACE FUNCTION changefeed.guard_rewrite() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'changefeed_guard_rewrite' LANGUAGE C SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp;

-- The types whose values hold values of type `t`: itself, its arrays,
-- domains over it, composite and range types of it, and so on.
CREATE OR REPLACE FUNCTION changefeed.types_holding(t oid) RETURNS SETOF oid
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE holds(oid) AS (
        SELECT t
        UNION
        SELECT y.oid FROM pg_type y, holds h
         WHERE (y.typelem = h.oid AND y.typlen = -1 AND y.typsubscript = 'array_subscript_handler'::regproc)
            OR y.typbasetype = h.oid
            OR (y.typtype = 'c' AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = y.typrelid
                                                AND a.atttypid = h.oid AND NOT a.attisdropped))
            OR y.oid IN (SELECT r.rngtypid FROM pg_range r WHERE r.rngsubtype = h.oid)
            OR y.oid IN (SELECT r.rngmultitypid FROM pg_range r WHERE r.rngtypid = h.oid))
    SELECT oid FROM holds
$$;

-- ddl_command_end on ALTER TYPE: RENAME VALUE of an enum rewrites no row but
-- changes the text of every stored value of it, with no row trigger fired:
-- refused (CF013) when a column of an enabled table or of one of its
-- partitions holds the enum (as itself, in an array, a domain, a composite
-- or a range).  ADD VALUE changes no stored value and passes.  The type is
-- the command's object, never a name looked up here.
CREATE OR REPLACE FUNCTION changefeed.guard_enum() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cmd record;
    hit record;
BEGIN
    IF changefeed.guard_suspended() OR NOT changefeed.any_capture_trigger() THEN
        RETURN;
    END IF;
    FOR cmd IN SELECT * FROM pg_event_trigger_ddl_commands() WHERE classid = 'pg_type'::regclass LOOP
        CONTINUE WHEN NOT changefeed.renames_enum_value(cmd.command);
        SELECT c, a.attrelid::regclass AS rel, a.attname INTO hit
          FROM changefeed.collection c
          CROSS JOIN LATERAL changefeed.tree_of(c.relid) t(rel)
          JOIN pg_attribute a ON a.attrelid = t.rel AND a.attnum > 0 AND NOT a.attisdropped
         WHERE a.atttypid IN (SELECT changefeed.types_holding(cmd.objid))
         ORDER BY c.id, a.attrelid, a.attnum LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'ALTER TYPE % RENAME VALUE refused: it would change values of % without a change in the feed',
                            cmd.objid::regtype, (hit.c).relid::regclass
                USING ERRCODE = 'CF013',
                      DETAIL = format('Column %I of %s holds values of %s and %s is enabled for changefeed '
                                      '(collection %s); renaming a value changes every stored one without firing '
                                      'a row trigger.', hit.attname, hit.rel, cmd.objid::regtype,
                                      (hit.c).relid::regclass, (hit.c).id),
                      HINT = format('Add the new value (ALTER TYPE %s ADD VALUE) and update the rows to it, or '
                                    'disable capture first: SELECT changefeed.disable(%L);',
                                    cmd.objid::regtype, (hit.c).relid::regclass::text);
        END IF;
    END LOOP;
END
$$;

-- Partition retention (partition_drops.cpp): whether this transaction
-- expired the rows of partition `rel` before dropping it; the TRUNCATE
-- guards of a partition leaving collection `collection_id` by DETACH.
CREATE OR REPLACE FUNCTION changefeed.partition_expired(rel oid) RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_partition_expired' LANGUAGE C STRICT;
CREATE OR REPLACE FUNCTION changefeed.drop_truncate_guards(collection_id int, part oid) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection;
    rel oid;
    was_suspended bool;
BEGIN
    SELECT * INTO STRICT c FROM changefeed.collection x WHERE x.id = collection_id;
    was_suspended := changefeed.suspend_guard(true);
    FOR rel IN SELECT g.tgrelid FROM pg_trigger g
                WHERE g.tgrelid IN (SELECT changefeed.tree_of(part))
                  AND g.tgname = changefeed.truncate_guard_name(c) ORDER BY 1 LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', changefeed.truncate_guard_name(c), rel::regclass);
    END LOOP;
    PERFORM changefeed.suspend_guard(was_suspended);
END
$$;

-- ddl_command_start on DROP TABLE: expires the rows of a partition of a
-- table with partition_drops = 'expire' before they go.  Not SECURITY
-- DEFINER, as guard_detach(): the names are the command's, resolved as its role.
CREATE OR REPLACE FUNCTION changefeed.guard_drop_partition() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'changefeed_guard_drop_partition' LANGUAGE C;

CREATE EVENT TRIGGER changefeed_guard_ddl ON ddl_command_end
    WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'ALTER FOREIGN TABLE', 'CREATE FOREIGN TABLE',
                 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION changefeed.guard_ddl();
CREATE EVENT TRIGGER changefeed_guard_drop ON sql_drop
    EXECUTE FUNCTION changefeed.guard_drop();
CREATE EVENT TRIGGER changefeed_guard_detach ON ddl_command_start
    WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION changefeed.guard_detach();

-- Event triggers, like row triggers, do not fire in replica mode unless ALWAYS.
ALTER EVENT TRIGGER changefeed_guard_ddl ENABLE ALWAYS;
ALTER EVENT TRIGGER changefeed_guard_drop ENABLE ALWAYS;
ALTER EVENT TRIGGER changefeed_guard_detach ENABLE ALWAYS;
CREATE EVENT TRIGGER changefeed_guard_drop_partition ON ddl_command_start
    WHEN TAG IN ('DROP TABLE')
    EXECUTE FUNCTION changefeed.guard_drop_partition();
ALTER EVENT TRIGGER changefeed_guard_drop_partition ENABLE ALWAYS;
CREATE EVENT TRIGGER changefeed_guard_rewrite ON table_rewrite
    EXECUTE FUNCTION changefeed.guard_rewrite();
ALTER EVENT TRIGGER changefeed_guard_rewrite ENABLE ALWAYS;
CREATE EVENT TRIGGER changefeed_guard_enum ON ddl_command_end
    WHEN TAG IN ('ALTER TYPE')
    EXECUTE FUNCTION changefeed.guard_enum();
ALTER EVENT TRIGGER changefeed_guard_enum ENABLE ALWAYS;

-- One row per enabled table (not those disabled with their state kept):
-- whether its capture is intact, and if not, why.
CREATE OR REPLACE FUNCTION changefeed.verify()
RETURNS TABLE (table_name regclass, collection_id int, intact bool, problems text[])
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
-- A Citus worker hides its shard placements from pg_class unless told not to.
SET citus.override_table_visibility = off AS $$
    SELECT c.relid::regclass, c.id, cardinality(p) = 0, p
      FROM changefeed.collection c, LATERAL changefeed.capture_problems(c, true) p
     WHERE c.disabled_at IS NULL
     ORDER BY c.id
$$;
