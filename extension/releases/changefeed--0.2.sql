-- changefeed: the SQLSTATEs the extension raises, each documented once here.
--
-- Our own codes are class CF.  The PostgreSQL codes listed are those raised
-- with a meaning of ours.  Every other place (the SQL files, the C++ constants
-- in extension/pg.hpp, the README's Errors table) uses these codes and
-- meanings; test/sqlstates.sh fails when one raises a code not listed here or
-- when the README's table differs from this one (`--readme` prints it).
--
-- sqlstate  meaning
--   CF001  the table has no primary key
--   CF002  the table is not enabled
--   CF003  an invalid option value (ranges, retention, unknown column, TTL column type, lease duration, page size, a NULL or infinite maintenance time…)
--   CF004  a bad position: malformed, truncated, forged or damaged, too long, newer than the database, or a `cf1.` position from before positions were authenticated (restart the consumer from a checkpoint taken since)
--   CF005  a position taken on another cluster or database
--   CF006  history lost: retention dropped changes the position had not read
--   CF008  the table is already enabled with other options
--   CF009  a read inside a transaction that captured changes itself
--   CF010  lease lost: a checkpoint by an instance that no longer owns the range (fenced)
--   CF011  an invalid processor or instance name (null, empty or too long)
--   CF012  a processor that never ran (lag, reset_checkpoint)
--   CF013  a DDL refused because it would let writes escape capture (see "What is refused")
--   CF014  a write refused because it would escape capture: replica mode on a table enabled without `replicated => true`, or a capture column missing
--   CF015  another live instance of the processor runs under this instance name
--   42501  not allowed: no `SELECT` on the table, a processor of another role, not the table's owner, another tenant
--   42809  not a table (a view, a sequence…)
--   22023  a bad read argument (mode, max_changes, range id)
-- changefeed: catalog (collections, the change log, its partitions).
\echo Use "CREATE EXTENSION changefeed" to load this file. \quit

-- The schema belongs to the extension, so pg_dump leaves it to CREATE EXTENSION.
CREATE SCHEMA changefeed;

-- One row per enabled table.  Options are fixed at enable() time: changing the
-- number of ranges would move documents between ranges under running consumers.
-- The table is a regclass, so a dump names it and a restore finds it again;
-- ids survive a restore with their sequence (the capture triggers carry them).
CREATE SEQUENCE changefeed.collection_id_seq AS int;
CREATE TABLE changefeed.collection (
    id              int NOT NULL DEFAULT nextval('changefeed.collection_id_seq') PRIMARY KEY,
    relid           regclass NOT NULL UNIQUE,
    key_columns     text[] NOT NULL,
    partition_key   text[] NOT NULL,
    ranges          int NOT NULL DEFAULT 16,
    retention       interval NOT NULL DEFAULT '7 days',
    keep_previous   bool NOT NULL DEFAULT true,
    tenant_column   text,
    ttl_column      text,
    enabled_at      timestamptz NOT NULL DEFAULT now(),
    -- Whether writes made in replica mode (logical replication apply) are
    -- captured; without it they are refused (CF014).
    replicated      bool NOT NULL DEFAULT false,
    -- Types of the columns capture depends on (key, partition key, tenant,
    -- TTL) when capture was installed: {"column": "type"}; the guard and
    -- verify() compare against it.
    column_types    jsonb NOT NULL DEFAULT '{}'
);

-- Per collection, the newest transaction whose changes retention dropped.
-- A position that has not delivered everything up to it has lost history.
-- Not dumped: a restored database starts with an empty log and positions of
-- its own (old ones are foreign there), and these transaction ids would mean
-- nothing on another cluster.
CREATE TABLE changefeed.horizon (
    collection_id   int PRIMARY KEY,
    dropped_txid    xid8 NOT NULL,
    dropped_before  timestamptz NOT NULL,   -- the dropped rows were written before this
    dropped_at      timestamptz NOT NULL DEFAULT now()
);

-- Ticks: snapshots the notifier records as changes commit (every
-- changefeed.tick_rows changes or changefeed.tick_interval, whichever first).
-- A reader far behind reads window by window between ticks instead of one
-- window up to now, so a backlog is paged in bounded windows.
CREATE TABLE changefeed.tick (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    snap_xmax xid8 NOT NULL,
    snap    pg_snapshot NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tick_xmax_idx ON changefeed.tick (snap_xmax);

-- The ordered change log shared by all collections.  Partitioned by time so
-- that retention drops whole partitions instead of deleting rows.
-- seq has no cache: a cached sequence would hand a later write of a row a
-- smaller number than an earlier one made in another session.
CREATE SEQUENCE changefeed.log_seq AS bigint CACHE 1;

CREATE TABLE changefeed.log (
    seq             bigint NOT NULL DEFAULT nextval('changefeed.log_seq'),
    txid            xid8 NOT NULL,
    collection_id   int NOT NULL,
    range_id        int NOT NULL,
    doc_id          text,            -- null for a clear (TRUNCATE)
    partition_key   text,
    op              "char" NOT NULL, -- c create, r replace, d delete, t clear
    current         jsonb,
    previous        jsonb,
    ttl_expired     bool NOT NULL DEFAULT false,
    written_at      timestamptz NOT NULL DEFAULT now(),
    tenant          text
) PARTITION BY RANGE (written_at);

-- The only index: reads select a collection's ranges by transaction id.
-- Every index is paid by every captured write.
CREATE INDEX log_read_idx ON changefeed.log (collection_id, range_id, txid);

-- Rows whose day has no partition yet land here, so a write never fails for
-- lack of a partition; maintain() keeps it empty in normal operation.
CREATE TABLE changefeed.log_default PARTITION OF changefeed.log DEFAULT;

-- Creates the daily partitions from yesterday up to `days_ahead` days ahead.
-- Returns how many partitions it created.  Each new partition is made a member
-- of the extension, so that pg_dump leaves it out (a restore's CREATE
-- EXTENSION and the next maintenance make their own); retention removes it
-- from the extension before dropping it.  Only the extension's owner (or a
-- superuser) may do that: maintenance runs as one.
CREATE FUNCTION changefeed.create_partitions(days_ahead int DEFAULT 7, as_of timestamptz DEFAULT now())
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d date;
    name text;
    created int := 0;
BEGIN
    IF days_ahead IS NULL OR days_ahead < 0 OR days_ahead > 366 THEN
        RAISE EXCEPTION 'days_ahead must be between 0 and 366, not %', days_ahead
            USING ERRCODE = 'CF003';
    END IF;
    IF as_of IS NULL OR NOT isfinite(as_of) THEN
        RAISE EXCEPTION 'as_of must be a finite time, not %', coalesce(as_of::text, 'null')
            USING ERRCODE = 'CF003', HINT = 'Pass a time, e.g. now().';
    END IF;
    -- Days are UTC days: capture routes rows by the UTC day of now().
    FOR d IN SELECT generate_series((as_of AT TIME ZONE 'UTC')::date - 1,
                                    (as_of AT TIME ZONE 'UTC')::date + days_ahead, '1 day')::date LOOP
        name := 'log_' || to_char(d, 'YYYYMMDD');
        IF to_regclass(format('changefeed.%I', name)) IS NULL THEN
            -- Rows of that day already sit in the default partition (maintenance
            -- did not run in time): leave them there; retention prunes them.
            IF EXISTS (SELECT 1 FROM changefeed.log_default
                        WHERE written_at >= d::timestamp AT TIME ZONE 'UTC'
                          AND written_at < (d + 1)::timestamp AT TIME ZONE 'UTC') THEN
                RAISE WARNING 'changefeed: rows of % are in the default partition; no partition created for that day', d;
                CONTINUE;
            END IF;
            EXECUTE format('CREATE TABLE changefeed.%I PARTITION OF changefeed.log FOR VALUES FROM (%L) TO (%L)',
                           name, d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
            -- Inside CREATE EXTENSION the new table is a member already.
            IF NOT EXISTS (SELECT 1 FROM pg_depend
                            WHERE classid = 'pg_class'::regclass
                              AND objid = format('changefeed.%I', name)::regclass
                              AND refclassid = 'pg_extension'::regclass AND deptype = 'e') THEN
                EXECUTE format('ALTER EXTENSION changefeed ADD TABLE changefeed.%I', name);
            END IF;
            created := created + 1;
        END IF;
    END LOOP;
    RETURN created;
END
$$;

-- Partitions from the start (after a restore too, where the first captured
-- writes may come before any maintenance).
SELECT changefeed.create_partitions(7);

SELECT pg_catalog.pg_extension_config_dump('changefeed.collection', '');
SELECT pg_catalog.pg_extension_config_dump('changefeed.collection_id_seq', '');
-- changefeed: who may do what (docs/security.md has the threat model).
--
-- Roles, created if missing (they are cluster-wide; NOLOGIN: grant them to
-- login roles):
--   changefeed_reader     read the feeds of tables it may SELECT, current_position(),
--                         the lag of its own processors
--   changefeed_processor  reader + run processors (leases, checkpoints)
--   changefeed_admin      processor + enable/disable/alter/maintain any collection,
--                         see and reset any processor, bind roles to tenants
-- A table's owner may enable, disable and alter its own table.  PUBLIC gets
-- nothing.  The tables of this schema are reached only through functions.
DO $$
DECLARE
    r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['changefeed_reader', 'changefeed_processor', 'changefeed_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = r) THEN
            EXECUTE pg_catalog.format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END
$$;
GRANT changefeed_reader TO changefeed_processor;
GRANT changefeed_processor TO changefeed_admin;

-- The role that called the innermost entry point (see extension/caller.cpp).
CREATE FUNCTION changefeed.caller() RETURNS oid
    AS 'MODULE_PATHNAME', 'changefeed_caller' LANGUAGE C STABLE PARALLEL RESTRICTED;

-- Processors belong to the role that first started them on a collection:
-- lease and checkpoint calls for it from another role fail (admin excepted).
CREATE TABLE changefeed.processor (
    collection_id int NOT NULL REFERENCES changefeed.collection (id) ON DELETE CASCADE,
    name          text NOT NULL,
    owner_role    regrole NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, name)
);

-- Roles bound to one tenant: every read by them returns only that tenant's changes.
CREATE TABLE changefeed.tenant_binding (
    role_id  regrole PRIMARY KEY,
    tenant   text NOT NULL
);

-- Whether `who` may administer every collection and processor.
CREATE FUNCTION changefeed.is_admin(who oid) RETURNS bool
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_has_role(who, 'changefeed_admin', 'USAGE')
$$;

CREATE FUNCTION changefeed.role_name(who oid) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT quote_ident(rolname) FROM pg_roles WHERE oid = who), who::text)
$$;

-- 42501 unless `who` owns `tbl` (has its owner's privileges) or is an admin.
CREATE FUNCTION changefeed.require_table_owner(tbl regclass, who oid, action text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF changefeed.is_admin(who)
       OR pg_has_role(who, (SELECT relowner FROM pg_class WHERE oid = tbl), 'USAGE') THEN
        RETURN;
    END IF;
    RAISE EXCEPTION 'permission denied to % %', action, tbl
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('Only the owner of %s or a member of changefeed_admin may do that; %s is neither.',
                              tbl, changefeed.role_name(who)),
              HINT = 'Ask the table owner, or GRANT changefeed_admin to the role.';
END
$$;

-- The tenants `who` is bound to (empty: unbound).  A role inherits the
-- bindings of the roles whose privileges it has; superusers are never bound.
CREATE FUNCTION changefeed.tenants_of(who oid) RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(DISTINCT b.tenant ORDER BY b.tenant), '{}')
      FROM changefeed.tenant_binding b
     WHERE NOT (SELECT rolsuper FROM pg_roles WHERE oid = who)
       AND EXISTS (SELECT 1 FROM pg_roles WHERE oid = b.role_id)
       AND pg_has_role(who, b.role_id, 'USAGE')
$$;

-- The tenants the calling role is bound to (empty: unbound).
CREATE FUNCTION changefeed.bound_tenants() RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT changefeed.tenants_of(changefeed.caller())
$$;

-- The tenants a read by `who` may return: null = all.  42501 when `who` may
-- not read `tbl`'s feed: it needs SELECT on the table; a table with row-level
-- security is refused unless `who` bypasses it (the feed cannot apply
-- policies); a role bound to tenants reads only those, and only collections
-- with a tenant column.
CREATE FUNCTION changefeed.require_read(tbl regclass, who oid, tenant_column text, wanted text)
RETURNS text[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bound text[] := changefeed.tenants_of(who);
    rls bool;
    owner oid;
BEGIN
    IF NOT has_table_privilege(who, tbl, 'SELECT') THEN
        RAISE EXCEPTION 'permission denied to read the change feed of %', tbl
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('Reading a feed needs SELECT on its table; %s does not have it.',
                                  changefeed.role_name(who));
    END IF;
    SELECT relrowsecurity, relowner INTO rls, owner FROM pg_class WHERE oid = tbl;
    IF rls AND NOT (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE oid = who)
       AND NOT pg_has_role(who, owner, 'USAGE') THEN
        RAISE EXCEPTION 'permission denied to read the change feed of %', tbl
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'The table has row-level security; its feed carries whole rows and cannot apply the policies.',
                  HINT = 'Read it as the table owner or a role with BYPASSRLS.';
    END IF;
    IF wanted IS NOT NULL AND tenant_column IS NULL THEN
        RAISE EXCEPTION 'table % has no tenant column', tbl
            USING ERRCODE = 'CF003', HINT = 'Enable it with tenant_column => ... to read by tenant.';
    END IF;
    IF cardinality(bound) = 0 THEN
        RETURN CASE WHEN wanted IS NULL THEN NULL ELSE ARRAY[wanted] END;
    END IF;
    IF tenant_column IS NULL THEN
        RAISE EXCEPTION 'permission denied to read the change feed of %', tbl
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('%s is bound to tenant %s and the table has no tenant column.',
                                  changefeed.role_name(who), array_to_string(bound, ', '));
    END IF;
    IF wanted IS NULL THEN
        RETURN bound;
    END IF;
    IF NOT wanted = ANY (bound) THEN
        RAISE EXCEPTION 'permission denied to read tenant % of %', quote_literal(wanted), tbl
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('%s is bound to tenant %s.', changefeed.role_name(who),
                                  array_to_string(bound, ', '));
    END IF;
    RETURN ARRAY[wanted];
END
$$;

-- 42501 unless `who` owns processor `name` on collection `collection_id`
-- (or is an admin).  With `claim`, an unknown processor becomes `who`'s.
CREATE FUNCTION changefeed.require_processor(tbl regclass, collection_id int, name text, who oid,
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
            -- A processor created before ownership existed, or never started:
            -- the lease functions report what is missing themselves.
            RETURN;
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

-- 42501 unless `who` is an admin.
CREATE FUNCTION changefeed.require_admin(who oid, action text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT changefeed.is_admin(who) THEN
        RAISE EXCEPTION 'permission denied to %', action
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('Only members of changefeed_admin may; %s is not one.', changefeed.role_name(who));
    END IF;
END
$$;

-- Binds `who` to one tenant (admin only): its reads then return only that
-- tenant's changes, whatever they ask.  Binding again replaces the tenant.
CREATE FUNCTION changefeed.bind_tenant(who regrole, tenant text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
END
$$;

CREATE FUNCTION changefeed.unbind_tenant(who regrole) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM changefeed.require_admin(changefeed.caller(), 'unbind roles from tenants');
    DELETE FROM changefeed.tenant_binding WHERE role_id = who;
    RETURN FOUND;
END
$$;

CREATE VIEW changefeed.tenant_bindings AS
SELECT b.role_id AS role_name, b.tenant FROM changefeed.tenant_binding b;

SELECT pg_catalog.pg_extension_config_dump('changefeed.processor', '');
SELECT pg_catalog.pg_extension_config_dump('changefeed.tenant_binding', '');
-- changefeed: enabling capture on a table.
--
-- SQLSTATEs: see 00_sqlstates.sql, the registry of every code we raise.

-- Row and TRUNCATE capture, implemented in C++ (extension/capture.cpp).
-- capture_row arguments: collection id, ranges, keep_previous (t/f),
-- replicated (t/f), number of key columns, their names, number of
-- partition-key columns, their names, tenant column name or ''.  Columns go by
-- name: a partition's clone of the trigger resolves them in the partition.
-- capture_truncate arguments: collection id, ranges, replicated (t/f).
CREATE FUNCTION changefeed.capture_row() RETURNS trigger
    AS 'MODULE_PATHNAME', 'changefeed_capture_row' LANGUAGE C;
CREATE FUNCTION changefeed.capture_truncate() RETURNS trigger
    AS 'MODULE_PATHNAME', 'changefeed_capture_truncate' LANGUAGE C;

-- The documented range hash: FNV-1a (32 bit) of the UTF-8 partition-key text,
-- modulo the number of ranges.  Exposed so that clients can compute it too.
CREATE FUNCTION changefeed.range_of(partition_key text, ranges int) RETURNS int
    AS 'MODULE_PATHNAME', 'changefeed_range_of' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- Starts this database's notifier if the library is preloaded and none runs;
-- returns whether one is running or starting.  Called by enable() and clients.
CREATE FUNCTION changefeed.ensure_notifier() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_ensure_notifier' LANGUAGE C;

-- Whether the library is loaded through shared_preload_libraries (writers
-- then issue no NOTIFY; a background worker does it for them).
CREATE FUNCTION changefeed.preloaded() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_preloaded' LANGUAGE C;

-- Whether the current transaction captured changes itself.
CREATE FUNCTION changefeed.captured_in_this_transaction() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_captured_in_xact' LANGUAGE C;

CREATE FUNCTION changefeed.channel_of(collection_id int) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
    AS $$ SELECT 'changefeed_' || collection_id::text $$;

-- Looks up an enabled table, failing with CF002 when it is not enabled.
CREATE FUNCTION changefeed.collection_of(tbl regclass) RETURNS changefeed.collection
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
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
    RETURN c;
END
$$;

-- Attribute numbers of `cols` in `tbl`, failing with CF003 for unknown columns.
CREATE FUNCTION changefeed.attnums_of(tbl regclass, cols text[], what text) RETURNS int[]
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
-- The guard (25_guard.sql) is suspended meanwhile: it refuses that DDL from anyone else.
CREATE FUNCTION changefeed.drop_triggers(tbl regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t record;
    was_suspended bool := changefeed.suspend_guard(true);
BEGIN
    FOR t IN SELECT g.tgname, g.tgrelid::regclass AS rel
               FROM pg_trigger g
              WHERE g.tgrelid IN (SELECT relid FROM pg_partition_tree(tbl) UNION SELECT tbl)
                AND g.tgparentid = 0
                AND (g.tgname IN ('changefeed_capture', 'changefeed_capture_truncate')
                     OR g.tgname LIKE 'changefeed\_truncate\_guard\_%')
              ORDER BY g.tgrelid = tbl, g.tgname LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
    END LOOP;
    PERFORM changefeed.suspend_guard(was_suspended);
END
$$;

-- Installs the capture triggers (ENABLE ALWAYS: they also fire in replica
-- mode, where capture_row refuses or captures as the collection says), the
-- TRUNCATE guards of a partitioned table, and records the types of the
-- columns capture depends on.
CREATE FUNCTION changefeed.install_triggers(c changefeed.collection) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    tbl regclass := c.relid::regclass;
    was_suspended bool;
    part regclass;
BEGIN
    PERFORM changefeed.attnums_of(tbl, c.key_columns, 'key');
    PERFORM changefeed.attnums_of(tbl, c.partition_key, 'partition key');
    IF c.tenant_column IS NOT NULL THEN
        PERFORM changefeed.attnums_of(tbl, ARRAY[c.tenant_column], 'tenant');
    END IF;
    PERFORM changefeed.drop_triggers(tbl);
    was_suspended := changefeed.suspend_guard(true);
    EXECUTE format('CREATE TRIGGER changefeed_capture AFTER INSERT OR UPDATE OR DELETE ON %s '
                   'FOR EACH ROW EXECUTE FUNCTION changefeed.capture_row(%s)',
                   tbl, changefeed.trigger_arguments_sql(changefeed.capture_row_arguments(c)));
    EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER changefeed_capture', tbl);
    EXECUTE format('CREATE TRIGGER changefeed_capture_truncate AFTER TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION changefeed.capture_truncate(%s)',
                   tbl, changefeed.trigger_arguments_sql(changefeed.capture_truncate_arguments(c)));
    EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER changefeed_capture_truncate', tbl);
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

-- Enables capture on a table and returns its collection id.  Enabling an
-- enabled table with the same options is a no-op; with other options, CF008.
CREATE FUNCTION changefeed.enable(
    tbl regclass,
    partition_key text[] DEFAULT NULL,
    ranges int DEFAULT 16,
    retention interval DEFAULT '7 days',
    keep_previous bool DEFAULT true,
    tenant_column text DEFAULT NULL,
    ttl_column text DEFAULT NULL,
    replicated bool DEFAULT false)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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

    SELECT * INTO existing FROM changefeed.collection WHERE relid = tbl FOR UPDATE;
    IF FOUND THEN
        IF (existing.partition_key, existing.ranges, existing.retention, existing.keep_previous,
            existing.tenant_column, existing.ttl_column, existing.replicated)
           IS NOT DISTINCT FROM (partition_key, ranges, retention, keep_previous, tenant_column, ttl_column,
                                 replicated) THEN
            RETURN existing.id;
        END IF;
        RAISE EXCEPTION 'table % is already enabled with other options', tbl
            USING ERRCODE = 'CF008',
                  HINT = 'Disable it first; positions and leases of the old options do not carry over.';
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

-- Removes capture from a table.  Its log rows stay until retention drops them.
CREATE FUNCTION changefeed.disable(tbl regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.require_table_owner(tbl, changefeed.caller(), 'disable the change feed of');
    PERFORM changefeed.drop_triggers(tbl);
    DELETE FROM changefeed.collection WHERE id = c.id;
END
$$;

-- Lists the collections whose tables the querying role may SELECT.
CREATE VIEW changefeed.collections WITH (security_barrier) AS
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
       c.replicated
  FROM changefeed.collection c
 WHERE pg_catalog.has_table_privilege(c.relid, 'SELECT');

-- Dropping an enabled table forgets its collection (and its leases); its log
-- rows stay until retention drops them.
-- SECURITY DEFINER: it runs on every role's DROP.
CREATE FUNCTION changefeed.forget_dropped() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM changefeed.collection c
     USING pg_event_trigger_dropped_objects() d
     WHERE d.classid = 'pg_class'::regclass AND d.objid = c.relid::oid AND d.objsubid = 0
       AND NOT d.is_temporary;
END
$$;
CREATE EVENT TRIGGER changefeed_forget_dropped ON sql_drop
    WHEN TAG IN ('DROP TABLE', 'DROP SCHEMA', 'DROP OWNED')
    EXECUTE FUNCTION changefeed.forget_dropped();
-- Replica mode (session_replication_role) must not leave a dropped table enabled.
ALTER EVENT TRIGGER changefeed_forget_dropped ENABLE ALWAYS;
-- changefeed: the capture guard and verify().
--
-- A write that misses the feed without an error is the worst bug this product
-- can have.  While a table is enabled, every DDL that would let writes escape
-- capture is refused with CF013 (the way out is changefeed.disable()):
-- disabling, dropping, renaming or replacing the capture triggers; dropping,
-- retyping or renaming the key, partition-key, tenant or TTL columns; a
-- primary key other than the collection's key; inheritance children;
-- DETACH PARTITION, DROP or TRUNCATE of a partition.  Partitions created or
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
CREATE FUNCTION changefeed.suspend_guard(suspend bool) RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_suspend_guard' LANGUAGE C STRICT;
CREATE FUNCTION changefeed.guard_suspended() RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_guard_suspended' LANGUAGE C;

-- BEFORE TRUNCATE FOR EACH STATEMENT on the root ('root') and on every
-- partition ('partition') of an enabled partitioned table: a TRUNCATE of the
-- root passes (its capture trigger logs the clear), one of a partition alone
-- is refused.  Arguments: collection id, 'root' or 'partition'.
CREATE FUNCTION changefeed.guard_truncate() RETURNS trigger
    AS 'MODULE_PATHNAME', 'changefeed_guard_truncate' LANGUAGE C;

-- Facts of a DDL command that its result does not show.
CREATE FUNCTION changefeed.attaches_partition(cmd pg_ddl_command) RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_attaches_partition' LANGUAGE C STRICT;
CREATE FUNCTION changefeed.replaces_trigger(cmd pg_ddl_command) RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_replaces_trigger' LANGUAGE C STRICT;

-- Whether any table of the database has a capture trigger: the guards' first,
-- cheap question, answered from the system catalog alone, so that DDL in a
-- database with no enabled table never even locks changefeed.collection.
CREATE FUNCTION changefeed.any_capture_trigger() RETURNS bool
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger
                    WHERE tgfoid = 'changefeed.capture_row()'::pg_catalog.regprocedure)
$$;

-- The enabled tables at or above `rel` in its inheritance/partition tree.
CREATE FUNCTION changefeed.enabled_above(rel oid) RETURNS SETOF changefeed.collection
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    WITH RECURSIVE up(oid) AS (
        SELECT rel
        UNION
        SELECT i.inhparent FROM pg_catalog.pg_inherits i JOIN up ON i.inhrelid = up.oid)
    SELECT c.* FROM changefeed.collection c WHERE c.relid IN (SELECT oid FROM up) ORDER BY c.id
$$;

-- The table and all its partitions (any depth).
CREATE FUNCTION changefeed.tree_of(tbl oid) RETURNS SETOF oid
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT tbl
    UNION
    SELECT t.relid::oid FROM pg_catalog.pg_partition_tree(tbl) t
$$;

-- The columns capture depends on: key, partition key, tenant, TTL.
CREATE FUNCTION changefeed.watched_columns(c changefeed.collection) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT array_agg(DISTINCT col ORDER BY col)
      FROM unnest(c.key_columns || c.partition_key || ARRAY[c.tenant_column, c.ttl_column]) col
     WHERE col IS NOT NULL
$$;

CREATE FUNCTION changefeed.column_types_of(c changefeed.collection) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(jsonb_object_agg(a.attname, format_type(a.atttypid, a.atttypmod)), '{}')
      FROM pg_attribute a
     WHERE a.attrelid = c.relid AND a.attnum > 0 AND NOT a.attisdropped
       AND a.attname = ANY (changefeed.watched_columns(c))
$$;

-- Trigger arguments (see capture_row/capture_truncate in 20_enable.sql).
CREATE FUNCTION changefeed.capture_row_arguments(c changefeed.collection) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT ARRAY[c.id::text, c.ranges::text,
                 CASE WHEN c.keep_previous THEN 't' ELSE 'f' END,
                 CASE WHEN c.replicated THEN 't' ELSE 'f' END,
                 cardinality(c.key_columns)::text]
           || c.key_columns || cardinality(c.partition_key)::text || c.partition_key
           || coalesce(c.tenant_column, '')
$$;

CREATE FUNCTION changefeed.capture_truncate_arguments(c changefeed.collection) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT ARRAY[c.id::text, c.ranges::text, CASE WHEN c.replicated THEN 't' ELSE 'f' END]
$$;

-- Arguments as a CREATE TRIGGER argument list, and as pg_trigger.tgargs holds them.
CREATE FUNCTION changefeed.trigger_arguments_sql(args text[]) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT string_agg(quote_literal(a), ', ' ORDER BY o) FROM unnest(args) WITH ORDINALITY u(a, o)
$$;

CREATE FUNCTION changefeed.trigger_arguments_bytes(args text[]) RETURNS bytea
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(string_agg(convert_to(a, getdatabaseencoding()) || '\x00'::bytea, ''::bytea ORDER BY o),
                    ''::bytea)
      FROM unnest(args) WITH ORDINALITY u(a, o)
$$;

CREATE FUNCTION changefeed.truncate_guard_name(c changefeed.collection) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS $$ SELECT 'changefeed_truncate_guard_' || c.id::text $$;

-- Whether a trigger is one capture depends on, or pretends to be: by name or by function.
CREATE FUNCTION changefeed.is_capture_trigger(name name, func oid) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT name IN ('changefeed_capture', 'changefeed_capture_truncate')
        OR name LIKE 'changefeed\_truncate\_guard\_%'
        OR func IN ('changefeed.capture_row()'::regprocedure, 'changefeed.capture_truncate()'::regprocedure,
                    'changefeed.guard_truncate()'::regprocedure)
$$;

-- What is wrong with one trigger of an enabled table's tree, or null.
-- `created`: it was just created (a restore enables it ALWAYS by the next statement).
CREATE FUNCTION changefeed.trigger_problem(trigger_oid oid, c changefeed.collection, created bool DEFAULT false)
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
    IF t.tgname = 'changefeed_capture' THEN
        func := 'changefeed.capture_row()'; events := 29;  -- AFTER ROW INSERT|DELETE|UPDATE
        args := changefeed.capture_row_arguments(c);
    ELSIF t.tgname = 'changefeed_capture_truncate' AND on_root THEN
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

-- Shapes of a table whose writes could escape capture: being a partition or
-- an inheritance child, having inheritance children (its own or its
-- partitions'), foreign partitions (written elsewhere), enabled partitions.
CREATE FUNCTION changefeed.shape_problems(tbl oid) RETURNS text[]
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
         WHERE c.relid IN (SELECT changefeed.tree_of(tbl)) AND c.relid <> tbl
    ) problems(n, p)
$$;

-- Everything that is not intact about a collection's capture.  `complete`
-- (verify) also reports what is absent; the guard (complete => false) reports
-- only what is present and wrong (see the header about restores).
CREATE FUNCTION changefeed.capture_problems(c changefeed.collection, complete bool DEFAULT true)
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
            FOREACH q IN ARRAY ARRAY['changefeed_capture']
                               || CASE WHEN rel = tbl THEN ARRAY['changefeed_capture_truncate'] ELSE '{}' END
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
CREATE FUNCTION changefeed.install_truncate_guard(c changefeed.collection, rel oid) RETURNS void
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

CREATE FUNCTION changefeed.refuse_hole(command text, c changefeed.collection, problems text[]) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
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
CREATE FUNCTION changefeed.holds_rows(rel oid) RETURNS bool
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
CREATE FUNCTION changefeed.guard_ddl() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    cmd record;
    rel oid;
    rels oid[];
    c changefeed.collection;
    checked int[] := '{}';
    added bool;
    problems text[];
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
        problems := changefeed.capture_problems(c, complete => false);
        IF cardinality(problems) > 0 THEN
            PERFORM changefeed.refuse_hole(tg_tag, c, problems);
        END IF;
    END LOOP;
END
$$;

-- sql_drop: refuses dropping a capture trigger or TRUNCATE guard (which is
-- also how DROP of a partition shows: its guard goes with it), the primary
-- key, or a watched column (also by DROP TYPE ... CASCADE) of an enabled table.
CREATE FUNCTION changefeed.guard_drop() RETURNS event_trigger
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
            FOR c IN SELECT * FROM changefeed.collection x WHERE x.relid = rel LOOP
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

-- ddl_command_start on ALTER TABLE: refuses DETACH PARTITION (C: it reads the
-- parse tree; CONCURRENTLY commits its first step before ddl_command_end).
-- SECURITY DEFINER without a pinned search_path: it resolves the table name
-- as the user's command will; its one query is fully schema-qualified.
CREATE FUNCTION changefeed.guard_detach() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'changefeed_guard_detach' LANGUAGE C SECURITY DEFINER;

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

-- One row per enabled table: whether its capture is intact, and if not, why.
CREATE FUNCTION changefeed.verify()
RETURNS TABLE (table_name regclass, collection_id int, intact bool, problems text[])
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT c.relid::regclass, c.id, cardinality(p) = 0, p
      FROM changefeed.collection c, LATERAL changefeed.capture_problems(c, true) p
     ORDER BY c.id
$$;
-- changefeed: positions and reads.
--
-- A position is opaque, versioned text.  It holds a lower snapshot `lo`
-- (everything visible in it was delivered) and, while a window is being paged,
-- the window's upper snapshot `hi` and the last seq delivered inside it.
-- Encoding and validation live in C++ (extension/position*.cpp); positions
-- carry a MAC under the cluster's key (changefeed_position.key in the data
-- directory), so only these functions can mint one.
-- STABLE: within a statement the same arguments give the same result (the
-- key never changes once created; decode's check against the next
-- transaction id can only turn an error into a result as time goes on, and an
-- error ends the statement).  PARALLEL SAFE: workers see the same cluster,
-- database, key file and shared transaction counter.
CREATE FUNCTION changefeed.position_encode(lo pg_snapshot, hi pg_snapshot, last_seq bigint)
RETURNS text AS 'MODULE_PATHNAME', 'changefeed_position_encode' LANGUAGE C STABLE PARALLEL SAFE;

CREATE FUNCTION changefeed.position_decode(pos text, OUT lo pg_snapshot, OUT hi pg_snapshot, OUT last_seq bigint)
RETURNS record AS 'MODULE_PATHNAME', 'changefeed_position_decode' LANGUAGE C STABLE PARALLEL SAFE;

-- The position of "now": a read from it returns what commits after this
-- statement's snapshot.  Inside a REPEATABLE READ transaction it is the
-- transaction's snapshot, the same one read() uses there.
CREATE FUNCTION changefeed.current_position() RETURNS text
LANGUAGE sql STABLE PARALLEL RESTRICTED SET search_path = pg_catalog, pg_temp AS $$
    SELECT changefeed.position_encode(pg_catalog.pg_current_snapshot(), NULL, 0)
$$;

-- The position from which a read delivers every change of collection `c`
-- written at or after `at` (written_at: the writing transaction's start), and
-- perhaps some written shortly before.  With S the current snapshot and m the
-- smallest transaction id among those changes, the position's snapshot `lo`
-- is S cut at m: everything before m that S saw committed counts as
-- delivered, transactions S saw in progress do not.  So a transaction still
-- open now, started after `at`, is delivered when it commits.  S is taken
-- before the log is searched: a transaction committing in between either has
-- its rows found (then m covers it) or was in progress in S.
-- CF003 for a NULL or infinite time, CF006 when retention dropped changes
-- written after `at`.
CREATE FUNCTION changefeed.position_since(c changefeed.collection, at timestamptz) RETURNS text
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
    IF FOUND AND at < h.dropped_before THEN
        RAISE EXCEPTION 'history lost for %: retention dropped changes written after the start time',
                        c.relid::regclass
            USING ERRCODE = 'CF006',
                  DETAIL = format('The start time is %s; changes written before %s were dropped at %s; the retention of %s is %s.',
                                  at, h.dropped_before, h.dropped_at, c.relid::regclass, c.retention),
                  HINT = 'Start from a later time, or rebuild the consumer from the table '
                         '(see docs/runbooks/history-lost.md).';
    END IF;
    s := pg_current_snapshot();
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

-- The position from which a read of `tbl` delivers every change written at or
-- after `at` (see position_since).  Needs the right to read `tbl`'s feed.
CREATE FUNCTION changefeed.position_at(tbl regclass, at timestamptz) RETURNS text
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.require_read(tbl, changefeed.caller(), c.tenant_column, NULL);
    RETURN changefeed.position_since(c, at);
END
$$;

CREATE FUNCTION changefeed.operation_name(op "char") RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE op WHEN 'c' THEN 'create' WHEN 'r' THEN 'replace'
                   WHEN 'd' THEN 'delete' WHEN 't' THEN 'clear' END
$$;

-- Reads the changes of `tbl` after `since`.
--   max_changes  at most this many rows (1 .. 100000)
--   ranges       only these range ids (null = all)
--   mode         'all': every version, deletes and clears included;
--                'latest': per window, the latest version of each changed
--                document; documents whose latest change is a delete or a
--                clear do not appear.
--   filter       a jsonpath predicate over the document, with its variables in
--                filter_vars (values are never spliced into the path), e.g.
--                filter => '$.status == $s', filter_vars => '{"s": "open"}'.
--                See filter_matches() for deletes and clears.
--   doc_ids      only changes of these documents (clears pass).
--   tenant       only changes of this tenant (collections with a tenant column;
--                clears pass).  A role bound to a tenant (bind_tenant) reads
--                only its tenant's changes, whatever it asks.
-- The caller needs SELECT on the table (42501 otherwise).
-- Rows come window by window (a window = what committed between two
-- snapshots), in seq order inside a window.  Each row carries the position
-- after it.  When a window is exhausted the read rolls over into the next one.
-- A large backlog is read in windows bounded by the notifier's ticks.
-- After a read that returned nothing, the position to keep is the read's own
-- snapshot: call read() and current_position() in one REPEATABLE READ
-- transaction.
-- event_id is "<collection id>.<txid>.<seq>": the same on every read of the
-- change by anyone, what a consumer deduplicates on (47_dedup.sql).
-- Whether a change passes a read's filter: creates and replaces are tested on
-- the document after the write, deletes on the one before it when the
-- collection keeps previous images (passed through otherwise), clears always
-- pass.  A filter that errors or is not a boolean counts as no match.
CREATE FUNCTION changefeed.filter_matches(op "char", current jsonb, previous jsonb,
                                          filter jsonpath, filter_vars jsonb) RETURNS bool
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE
        WHEN filter IS NULL OR op = 't' THEN true
        WHEN op = 'd' THEN previous IS NULL
                        OR coalesce(pg_catalog.jsonb_path_match(previous, filter, coalesce(filter_vars, '{}'), true), false)
        ELSE coalesce(pg_catalog.jsonb_path_match(current, filter, coalesce(filter_vars, '{}'), true), false)
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
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
            -- More than a page of backlog is read tick by tick (bounded windows), less
            -- in a single window up to now.
            SELECT count(*) INTO backlog FROM (
                SELECT 1 FROM (
                    SELECT 1 FROM changefeed.log l
                     WHERE l.collection_id = c.id AND l.range_id = ANY (wanted)
                       AND l.txid >= lo_xmax AND l.txid < pg_snapshot_xmax(current_snap)
                       AND pg_visible_in_snapshot(l.txid, current_snap)
                    UNION ALL
                    SELECT 1 FROM changefeed.log l
                     WHERE l.collection_id = c.id AND l.range_id = ANY (wanted)
                       AND l.txid = ANY (lo_xip)
                       AND pg_visible_in_snapshot(l.txid, current_snap)) u
                 LIMIT max_changes + 1) b;
            IF backlog > max_changes THEN
                -- A tick taken after `lo` (larger xmax) sees everything `lo` sees.
                SELECT t.snap INTO hi FROM changefeed.tick t
                 WHERE t.snap_xmax > pg_snapshot_xmax(lo) AND t.snap_xmax <= pg_snapshot_xmax(current_snap)
                 ORDER BY t.snap_xmax LIMIT 1;
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
        picked AS (
            SELECT f.* FROM (
            SELECT w.* FROM window_rows w
             WHERE mode = 'all' AND w.seq > after
            UNION ALL
            SELECT v.* FROM (
                SELECT DISTINCT ON (w.range_id, w.doc_id) w.*
                  FROM window_rows w
                 WHERE mode = 'latest' AND w.op <> 't'
                 ORDER BY w.range_id, w.doc_id, w.seq DESC
            ) v
             WHERE v.op <> 'd' AND v.seq > after
               AND NOT EXISTS (SELECT 1 FROM window_rows t
                                WHERE t.op = 't' AND t.range_id = v.range_id AND t.seq > v.seq)
            ) f
             WHERE (doc_ids IS NULL OR f.op = 't' OR f.doc_id = ANY (doc_ids))
               AND (tenants IS NULL OR f.op = 't' OR f.tenant = ANY (tenants))
               AND changefeed.filter_matches(f.op, f.current, f.previous, filter, filter_vars)
        ),
        page AS (
            SELECT pk.*, row_number() OVER (ORDER BY pk.seq) AS rn
              FROM (SELECT * FROM picked ORDER BY seq LIMIT remaining + 1) pk
        ),
        counted AS (
            SELECT pg.*, count(*) OVER () AS total FROM page pg
        )
        SELECT k.seq, k.txid, k.range_id, changefeed.operation_name(k.op), k.doc_id, k.partition_key,
               k.current, k.previous, k.ttl_expired, k.written_at, k.tenant,
               CASE WHEN k.total <= remaining AND k.rn = k.total
                    THEN changefeed.position_encode(hi, NULL, 0)   -- window exhausted
                    ELSE changefeed.position_encode(lo, hi, k.seq) END,
               c.id::text || '.' || k.txid::text || '.' || k.seq::text
          FROM counted k
         WHERE k.rn <= remaining
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

-- Reads many ranges of `tbl`, each from its own position, in one call: the
-- wake-up of a processor instance over all the ranges it owns.
--   ranges, positions  range ids and the position each resumes from (same
--                      length, no nulls, no range twice)
--   max_changes        at most this many change rows in all (1 .. 100000)
--   mode, tenant       as in read()
-- Ranges at one position are read together by one read() (one window scan,
-- whatever their number); the groups are read oldest position first, each
-- with what is left of max_changes, so a group behind is never starved and
-- the groups come together once caught up.
-- Rows: the change rows of each range, in seq order (the order read() gives),
-- and marker rows (seq null) whose `resume_ranges` resume at `position` once
-- their change rows are handled.  A range in no marker row was not read (the
-- budget ran out first): it keeps its position.  Ranges read up to the
-- call's snapshot (all those that had nothing, and those whose group's rows
-- fit in the budget) resume at that snapshot, so an idle wake-up returns one
-- marker row and ranges at diverged positions come together once caught up.
-- Must run in a REPEATABLE READ (or SERIALIZABLE) transaction: that snapshot
-- is then the one every read in the call saw (25001 otherwise).
CREATE FUNCTION changefeed.read_ranges(
    tbl regclass,
    ranges int[],
    positions text[],
    max_changes int DEFAULT 1000,
    mode text DEFAULT 'all',
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
    event_id text,
    resume_ranges int[])   -- marker rows only
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection;
    g record;
    r record;
    remaining int := max_changes;
    n int;
    last_pos text;
    now_pos text;
    now_xmax xid8;
    idle int[] := '{}';
BEGIN
    IF current_setting('transaction_isolation') NOT IN ('repeatable read', 'serializable') THEN
        RAISE EXCEPTION 'read_ranges() must run in a REPEATABLE READ transaction'
            USING ERRCODE = 'active_sql_transaction',
                  HINT = 'BEGIN ISOLATION LEVEL REPEATABLE READ first: idle ranges resume at the transaction''s snapshot.';
    END IF;
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
    PERFORM changefeed.require_read(tbl, changefeed.caller(), c.tenant_column, only_tenant);
    IF ranges IS NULL OR positions IS NULL
       OR coalesce(array_length(ranges, 1), 0) <> coalesce(array_length(positions, 1), 0) THEN
        RAISE EXCEPTION 'ranges and positions must be arrays of the same length'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(ranges) x WHERE x IS NULL OR x < 0 OR x >= c.ranges) THEN
        RAISE EXCEPTION 'range ids must be between 0 and %', c.ranges - 1
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (SELECT count(DISTINCT x) FROM unnest(ranges) x) <> coalesce(array_length(ranges, 1), 0) THEN
        RAISE EXCEPTION 'a range id must not be given twice' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(positions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'position must not be null' USING ERRCODE = 'CF004',
              HINT = 'Start from changefeed.current_position(), or from a position a previous read returned.';
    END IF;
    now_pos := changefeed.current_position();
    now_xmax := pg_snapshot_xmax(pg_current_snapshot());

    FOR g IN
        SELECT q.pos, q.rs, pg_snapshot_xmax(coalesce(d.hi, d.lo)) AS upto
          FROM (SELECT p.pos, array_agg(p.r ORDER BY p.r) AS rs
                  FROM unnest(ranges, positions) AS p(r, pos) GROUP BY p.pos) q
          CROSS JOIN LATERAL changefeed.position_decode(q.pos) d
         ORDER BY pg_snapshot_xmax(d.lo), d.hi IS NOT NULL, pg_snapshot_xmax(d.hi), d.last_seq, q.pos
    LOOP
        EXIT WHEN remaining = 0;
        n := 0;
        FOR r IN
            SELECT * FROM changefeed._read(tbl, g.pos, remaining,
                                           CASE WHEN cardinality(g.rs) = c.ranges THEN NULL ELSE g.rs END,
                                           mode, NULL, NULL, NULL, only_tenant)
        LOOP
            seq := r.seq; txid := r.txid; range_id := r.range_id; operation := r.operation;
            doc_id := r.doc_id; partition_key := r.partition_key; current := r.current;
            previous := r.previous; ttl_expired := r.ttl_expired; written_at := r.written_at;
            tenant := r.tenant; "position" := r."position"; event_id := r.event_id; resume_ranges := NULL;
            RETURN NEXT;
            n := n + 1;
            last_pos := r."position";
        END LOOP;
        IF n < remaining AND now_xmax >= g.upto THEN
            -- A read stops short of its budget only at the snapshot: the group
            -- resumes there, with the idle ones (so groups come together).
            idle := idle || g.rs;
            remaining := remaining - n;
            CONTINUE;
        END IF;
        remaining := remaining - n;
        IF n > 0 THEN
            -- Valid for every range of the group: rows come in seq order across
            -- them, so one without rows up to the last row had none before it.
            seq := NULL; txid := NULL; range_id := NULL; operation := NULL; doc_id := NULL;
            partition_key := NULL; current := NULL; previous := NULL; ttl_expired := NULL;
            written_at := NULL; tenant := NULL; event_id := NULL;
            "position" := last_pos; resume_ranges := g.rs;
            RETURN NEXT;
        ELSE
            seq := NULL; txid := NULL; range_id := NULL; operation := NULL; doc_id := NULL;
            partition_key := NULL; current := NULL; previous := NULL; ttl_expired := NULL;
            written_at := NULL; tenant := NULL; event_id := NULL;
            "position" := g.pos; resume_ranges := g.rs;   -- newer than our snapshot: stays
            RETURN NEXT;
        END IF;
    END LOOP;
    IF cardinality(idle) > 0 THEN
        seq := NULL; txid := NULL; range_id := NULL; operation := NULL; doc_id := NULL;
        partition_key := NULL; current := NULL; previous := NULL; ttl_expired := NULL;
        written_at := NULL; tenant := NULL; event_id := NULL;
        "position" := now_pos; resume_ranges := (SELECT array_agg(x ORDER BY x) FROM unnest(idle) x);
        RETURN NEXT;
    END IF;
END
$$;
-- changefeed: leases and checkpoints of change-feed processors.
--
-- One lease per (collection, processor name, range).  The instance owning a
-- lease is the only one reading that range; `epoch` is bumped on every change
-- of ownership and fences checkpoints: an instance that lost a lease can never
-- move its checkpoint again.  All times come from the server's clock, so
-- instances with skewed clocks still agree on expiry.
--
-- SQLSTATEs: see 00_sqlstates.sql (CF010 lease lost, CF011 bad name, CF003).

CREATE TABLE changefeed.lease (
    collection_id     int NOT NULL REFERENCES changefeed.collection (id) ON DELETE CASCADE,
    processor         text NOT NULL,
    range_id          int NOT NULL,
    owner             text,                    -- null: free
    epoch             bigint NOT NULL DEFAULT 0,
    expires_at        timestamptz,
    checkpoint        text NOT NULL,           -- position to read the log from
    -- start_from_beginning: the table is scanned before the log is read.
    backfill_done     bool NOT NULL DEFAULT true,
    backfill_after    jsonb,                   -- primary key of the last row delivered
    backfill_rows     bigint NOT NULL DEFAULT 0,
    backfill_position text,                    -- where the log continues after the scan
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, processor, range_id)
);

SELECT pg_catalog.pg_extension_config_dump('changefeed.lease', '');

-- The leases of the processors the querying role owns (all of them for admins).
CREATE VIEW changefeed.leases WITH (security_barrier) AS
SELECT l.collection_id, c.relid AS table_name, l.processor, l.range_id, l.owner,
       l.epoch, l.expires_at, l.expires_at > now() AS live, l.checkpoint,
       l.backfill_done, l.backfill_rows, l.updated_at, p.owner_role
  FROM changefeed.lease l
  JOIN changefeed.collection c ON c.id = l.collection_id
  LEFT JOIN changefeed.processor p ON p.collection_id = l.collection_id AND p.name = l.processor
 WHERE pg_catalog.pg_has_role('changefeed_admin', 'USAGE')
    OR (p.owner_role IS NOT NULL AND pg_catalog.pg_has_role(p.owner_role, 'USAGE'));

CREATE FUNCTION changefeed.check_name(name text, what text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION '% name must not be empty', what USING ERRCODE = 'CF011';
    END IF;
    IF length(name) > 200 THEN
        RAISE EXCEPTION '% name must be at most 200 characters', what USING ERRCODE = 'CF011';
    END IF;
    RETURN name;
END
$$;

CREATE FUNCTION changefeed.check_duration(d interval) RETURNS interval
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF d IS NULL OR d <= interval '0' THEN
        RAISE EXCEPTION 'lease duration must be a positive interval, not %', coalesce(d::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    RETURN d;
END
$$;

-- The collection of `tbl`, once the processor name is valid and the calling
-- role owns processor `processor` (or is an admin): the prologue of every
-- lease function but lease_init, which claims the name.
CREATE FUNCTION changefeed.processor_of(tbl regclass, processor text) RETURNS changefeed.collection
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.check_name(processor, 'processor');
    PERFORM changefeed.require_processor(tbl, c.id, processor, changefeed.caller());
    RETURN c;
END
$$;

-- The same, for a call by one instance of the processor.
CREATE FUNCTION changefeed.processor_of(tbl regclass, processor text, instance text)
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

-- Creates the processor's lease set on its first start and returns the number
-- of leases.  The leases hold the start position, so an instance that starts
-- later does not skip what was written in between.  The start is now, or at
-- most one of: `from_beginning` (scan the table first), `start_at` (the
-- changes written since then, see position_since) or `start_position`.
-- Existing leases (checkpoints) always win: the start options are then only
-- validated, so a service restarted with an old start time goes on from its
-- checkpoints.  CF003 for conflicting or infinite options, CF004/CF005 for a
-- bad position, CF006 when retention dropped what the start needs.
CREATE FUNCTION changefeed.lease_init(tbl regclass, processor text, from_beginning bool DEFAULT false,
                                      start_at timestamptz DEFAULT NULL, start_position text DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    pos text;
BEGIN
    PERFORM changefeed.check_name(processor, 'processor');
    -- A processor reads the table's feed, and belongs to the role that first starts it.
    PERFORM changefeed.require_read(tbl, changefeed.caller(), c.tenant_column, NULL);
    PERFORM changefeed.require_processor(tbl, c.id, processor, changefeed.caller(), true);
    IF from_beginning IS NULL THEN
        RAISE EXCEPTION 'from_beginning must not be null' USING ERRCODE = 'CF003';
    END IF;
    IF from_beginning::int + (start_at IS NOT NULL)::int + (start_position IS NOT NULL)::int > 1 THEN
        RAISE EXCEPTION 'at most one of from_beginning, start_at and start_position may be given'
            USING ERRCODE = 'CF003';
    END IF;
    IF start_at IS NOT NULL AND NOT isfinite(start_at) THEN
        RAISE EXCEPTION 'start_at must be a finite time, not %', start_at USING ERRCODE = 'CF003';
    END IF;
    IF start_position IS NOT NULL THEN
        PERFORM changefeed.position_decode(start_position);
    END IF;
    -- One first start at a time: a concurrent one waits here, then finds the leases.
    PERFORM 1 FROM changefeed.processor p WHERE p.collection_id = c.id AND p.name = processor FOR UPDATE;
    IF EXISTS (SELECT 1 FROM changefeed.lease l WHERE l.collection_id = c.id AND l.processor = processor) THEN
        RETURN c.ranges;
    END IF;
    IF start_at IS NOT NULL THEN
        pos := changefeed.position_since(c, start_at);
    ELSIF start_position IS NOT NULL THEN
        pos := start_position;
    ELSE
        pos := changefeed.current_position();
    END IF;
    PERFORM changefeed.check_history(c, (changefeed.position_decode(pos)).lo);
    INSERT INTO changefeed.lease AS l
           (collection_id, processor, range_id, checkpoint, backfill_done, backfill_position)
    SELECT c.id, processor, r, pos, NOT from_beginning, CASE WHEN from_beginning THEN pos END
      FROM generate_series(0, c.ranges - 1) r
    ON CONFLICT DO NOTHING;
    RETURN c.ranges;
END
$$;

-- Takes one lease for `instance`, bumping its epoch so the previous owner is
-- fenced.  Returns false if the lease changed hands since it was looked at.
CREATE FUNCTION changefeed.lease_steal(tbl regclass, processor text, range_id int, instance text,
                                       from_owner text, duration interval)
RETURNS bool LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    PERFORM changefeed.check_duration(duration);
    UPDATE changefeed.lease l
       SET owner = instance, epoch = l.epoch + 1, expires_at = now() + duration, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = range_id
       AND l.owner IS NOT DISTINCT FROM from_owner;
    RETURN FOUND;
END
$$;

-- The leases `instance` holds, with where each range resumes.
CREATE FUNCTION changefeed.leases_held(collection_id int, processor text, instance text)
RETURNS TABLE (range_id int, epoch bigint, checkpoint text, backfill_done bool,
               backfill_after jsonb, backfill_rows bigint, backfill_position text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT l.range_id, l.epoch, l.checkpoint, l.backfill_done, l.backfill_after, l.backfill_rows,
           l.backfill_position
      FROM changefeed.lease l
     WHERE l.collection_id = $1 AND l.processor = $2 AND l.owner = $3
     ORDER BY l.range_id
$$;

-- One balancing step for `instance`.  With N live instances (live_instances)
-- and R ranges, an equal share is R/N rounded down or up.  The step takes
-- free and expired leases up to R/N rounded up, then, while `instance` holds
-- fewer than R/N rounded down, takes the missing ones at once from instances
-- holding more than that (never making them fall below it), a few from each,
-- bumping the epochs so the previous owners are fenced (their checkpoints
-- fail with CF010).  Instances above their share give nothing away on their
-- own: the ones below take.  So instances started together are balanced after
-- one step each, and a joining or leaving instance within about one acquire
-- interval (a dead one's leases once they expire).  Returns the leases
-- `instance` owns afterwards.
CREATE FUNCTION changefeed.lease_acquire(tbl regclass, processor text, instance text, duration interval)
RETURNS TABLE (range_id int, epoch bigint, checkpoint text, backfill_done bool,
               backfill_after jsonb, backfill_rows bigint, backfill_position text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
    live int;
    floor_share int;
    ceil_share int;
    mine int;
    mine_expired int;
    n_free int;
    holders text[];
    ids int[];
BEGIN
    PERFORM changefeed.check_duration(duration);
    -- Serialize balancing steps of one processor: each sees the others'
    -- result.  One row lock (the processor's), not one per lease: a step's
    -- cost must not grow with the ranges it leaves alone.  The leases it
    -- moves are updated, which is what fences their previous owners.
    PERFORM 1 FROM changefeed.processor p WHERE p.collection_id = c.id AND p.name = processor FOR UPDATE;
    IF NOT EXISTS (SELECT 1 FROM changefeed.lease l WHERE l.collection_id = c.id AND l.processor = processor) THEN
        RAISE EXCEPTION 'processor "%" has no leases on %', processor, tbl
            USING ERRCODE = 'CF003', HINT = 'Call changefeed.lease_init() first.';
    END IF;

    -- One pass over the leases: an idle step (balanced, nothing free or
    -- expired) writes nothing.
    SELECT count(*) FILTER (WHERE l.owner = instance),
           count(*) FILTER (WHERE l.owner = instance AND (l.expires_at IS NULL OR l.expires_at <= now())),
           count(*) FILTER (WHERE l.owner IS DISTINCT FROM instance
                              AND (l.owner IS NULL OR l.expires_at IS NULL OR l.expires_at <= now())),
           array_agg(DISTINCT l.owner) FILTER (WHERE l.owner IS NOT NULL AND l.expires_at > now())
      INTO mine, mine_expired, n_free, holders
      FROM changefeed.lease l
     WHERE l.collection_id = c.id AND l.processor = processor;
    SELECT count(*) INTO live FROM (
        SELECT x FROM changefeed.live_instances(c.id, processor, instance) x
        UNION SELECT unnest(holders)) v;
    floor_share := c.ranges / live;
    ceil_share := ceil(c.ranges::numeric / live)::int;

    -- Our own expired leases come back without a new epoch: nobody else held them.
    IF mine_expired > 0 THEN
        SELECT array_agg(o.range_id) INTO ids FROM (
            SELECT l.range_id FROM changefeed.lease l
             WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance
               AND (l.expires_at IS NULL OR l.expires_at <= now())
             ORDER BY l.range_id FOR NO KEY UPDATE) o;   -- in range order (see lease_renew)
        UPDATE changefeed.lease l
           SET expires_at = now() + duration, updated_at = now()
         WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = ANY (ids);
    END IF;

    IF mine < ceil_share AND n_free > 0 THEN
        SELECT array_agg(f.range_id) INTO ids FROM (
            SELECT l.range_id FROM changefeed.lease l
             WHERE l.collection_id = c.id AND l.processor = processor
               AND (l.owner IS NULL OR l.expires_at IS NULL OR l.expires_at <= now())
               AND l.owner IS DISTINCT FROM instance
             ORDER BY l.range_id LIMIT ceil_share - mine
               FOR NO KEY UPDATE) f;   -- in range order (see lease_renew)
        UPDATE changefeed.lease l
           SET owner = instance, epoch = l.epoch + 1, expires_at = now() + duration, updated_at = now()
         WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = ANY (ids);
        SELECT count(*) INTO mine FROM changefeed.lease l
         WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance;
    END IF;

    IF mine < floor_share THEN
        -- Each instance above the share gives its highest ranges beyond it,
        -- taken round-robin so that all of them come down together.
        WITH held AS (
            SELECT l.range_id, l.owner,
                   count(*) OVER (PARTITION BY l.owner) AS n,
                   row_number() OVER (PARTITION BY l.owner ORDER BY l.range_id DESC) AS k
              FROM changefeed.lease l
             WHERE l.collection_id = c.id AND l.processor = processor
               AND l.owner IS NOT NULL AND l.owner <> instance AND l.expires_at > now()
        )
        SELECT array_agg(t.range_id) INTO ids FROM (
            SELECT h.range_id FROM held h
             WHERE h.k <= h.n - floor_share
             ORDER BY h.k, h.n DESC, h.owner
             LIMIT floor_share - mine) t;
        PERFORM 1 FROM changefeed.lease l   -- in range order (see lease_renew)
          WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = ANY (ids)
          ORDER BY l.range_id FOR NO KEY UPDATE;
        UPDATE changefeed.lease l
           SET owner = instance, epoch = l.epoch + 1, expires_at = now() + duration, updated_at = now()
         WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = ANY (ids);
    END IF;

    RETURN QUERY SELECT * FROM changefeed.leases_held(c.id, processor, instance);
END
$$;

-- Extends the leases `instance` still owns and returns them with their epochs.
-- A lease missing from the result was taken over: stop reading its range.
CREATE FUNCTION changefeed.lease_renew(tbl regclass, processor text, instance text, duration interval)
RETURNS TABLE (range_id int, epoch bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    PERFORM changefeed.check_duration(duration);
    -- Rows are locked in range order, as by every function writing many
    -- leases (lease_checkpoint_many holds some while it takes others).
    PERFORM 1 FROM changefeed.lease l
      WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance
      ORDER BY l.range_id FOR NO KEY UPDATE;
    RETURN QUERY
    UPDATE changefeed.lease l
       SET expires_at = now() + duration, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance
    RETURNING l.range_id, l.epoch;
END
$$;

-- Gives up leases (all of the instance's, or only `range_ids`) so that another
-- instance takes them over at once instead of waiting for expiry.
CREATE FUNCTION changefeed.lease_release(tbl regclass, processor text, instance text,
                                         range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
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

CREATE FUNCTION changefeed.lease_lost(tbl regclass, processor text, range_id int, instance text, epoch bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'lease on range % of processor "%" on % is no longer held by "%" at epoch %',
                    range_id, processor, tbl, instance, epoch
        USING ERRCODE = 'CF010',
              HINT = 'Another instance took the lease over; its checkpoint is not moved.';
END
$$;

-- The fence of every write a range's owner makes to its lease (checkpoint,
-- backfill progress, resync): locks the lease row if `instance` still owns it
-- at `epoch`, else raises CF010 (lease_lost).  The caller then updates the row
-- by its key; the lock keeps the owner and epoch as checked until commit.
CREATE FUNCTION changefeed.lease_fence(collection_id int, tbl regclass, processor text, range_id int,
                                       instance text, epoch bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
    PERFORM 1 FROM changefeed.lease l
     WHERE l.collection_id = collection_id AND l.processor = processor AND l.range_id = range_id
       AND l.owner = instance AND l.epoch = epoch
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM changefeed.lease_lost(tbl, processor, range_id, instance, epoch);
    END IF;
END
$$;

-- Moves a range's checkpoint, only if `instance` still owns the lease at
-- `epoch` (CF010 otherwise).  The position is validated (CF004/CF005).
CREATE FUNCTION changefeed.lease_checkpoint(tbl regclass, processor text, range_id int,
                                            instance text, epoch bigint, "position" text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    IF "position" IS NULL THEN
        RAISE EXCEPTION 'position must not be null' USING ERRCODE = 'CF004';
    END IF;
    PERFORM changefeed.position_decode("position");
    PERFORM changefeed.lease_fence(c.id, tbl, processor, range_id, instance, epoch);
    UPDATE changefeed.lease l
       SET checkpoint = "position", updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = range_id;
END
$$;

-- Moves the checkpoints of many ranges in one call: range_ids[i] to
-- positions[i], each only if `instance` still owns it at epochs[i].  A range
-- that changed hands is not moved and does not stop the others: its id is
-- returned (the caller drops that range, as after CF010 from
-- lease_checkpoint).  Every position is validated first (CF004/CF005 for the
-- whole call); arrays of different lengths, nulls or a range twice: 22023.
CREATE FUNCTION changefeed.lease_checkpoint_many(tbl regclass, processor text, instance text,
                                                 range_ids int[], epochs bigint[], positions text[])
RETURNS SETOF int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
    n int := coalesce(array_length(range_ids, 1), 0);
    held int[];
BEGIN
    IF range_ids IS NULL OR epochs IS NULL OR positions IS NULL
       OR coalesce(array_length(epochs, 1), 0) <> n OR coalesce(array_length(positions, 1), 0) <> n THEN
        RAISE EXCEPTION 'range_ids, epochs and positions must be arrays of the same length'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(range_ids, NULL) IS NOT NULL OR array_position(epochs, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'range ids and epochs must not be null' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(positions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'position must not be null' USING ERRCODE = 'CF004';
    END IF;
    IF (SELECT count(DISTINCT x) FROM unnest(range_ids) x) <> n THEN
        RAISE EXCEPTION 'a range id must not be given twice' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM changefeed.position_decode(x) FROM unnest(positions) x;
    -- The fence of lease_fence() for all of them: the rows still ours at
    -- their epoch, locked in range order (the order lease_acquire locks in).
    SELECT coalesce(array_agg(h.range_id), '{}') INTO held FROM (
        SELECT l.range_id FROM changefeed.lease l
          JOIN unnest(range_ids, epochs) AS w(r, e) ON w.r = l.range_id
         WHERE l.collection_id = c.id AND l.processor = processor
           AND l.owner = instance AND l.epoch = w.e
         ORDER BY l.range_id
           FOR NO KEY UPDATE OF l) h;
    UPDATE changefeed.lease l
       SET checkpoint = w.pos, updated_at = now()
      FROM unnest(range_ids, positions) AS w(r, pos)
     WHERE l.collection_id = c.id AND l.processor = processor
       AND l.range_id = w.r AND w.r = ANY (held);
    RETURN QUERY SELECT w.r FROM unnest(range_ids) AS w(r) WHERE w.r <> ALL (held) ORDER BY 1;
END
$$;

-- Records backfill progress of a range (the primary key of the last row
-- delivered, as jsonb), fenced like lease_checkpoint().
CREATE FUNCTION changefeed.lease_backfill_checkpoint(tbl regclass, processor text, range_id int,
                                                     instance text, epoch bigint, after jsonb,
                                                     rows_done bigint, done bool)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    IF done IS NULL OR rows_done IS NULL OR rows_done < 0 THEN
        RAISE EXCEPTION 'done and rows_done must be given' USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.lease_fence(c.id, tbl, processor, range_id, instance, epoch);
    UPDATE changefeed.lease l
       SET backfill_after = coalesce(after, l.backfill_after), backfill_rows = rows_done,
           backfill_done = done, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = range_id;
END
$$;

-- Restarts a range as a backfill after its history was lost (the client's
-- `resync` option of the latest-version processor): the table's current rows
-- are scanned again, then the log continues from the position taken here.
-- Fenced like lease_checkpoint().  Returns that position.
CREATE FUNCTION changefeed.lease_resync(tbl regclass, processor text, range_id int,
                                        instance text, epoch bigint)
RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
    pos text := changefeed.current_position();
BEGIN
    PERFORM changefeed.lease_fence(c.id, tbl, processor, range_id, instance, epoch);
    UPDATE changefeed.lease l
       SET checkpoint = pos, backfill_done = false, backfill_after = NULL, backfill_rows = 0,
           backfill_position = pos, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = range_id;
    RETURN pos;
END
$$;

-- The leases `instance` owns, with their checkpoints (what a restarted range
-- worker resumes from).
CREATE FUNCTION changefeed.lease_owned(tbl regclass, processor text, instance text)
RETURNS TABLE (range_id int, epoch bigint, checkpoint text, backfill_done bool,
               backfill_after jsonb, backfill_rows bigint, backfill_position text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    RETURN QUERY SELECT * FROM changefeed.leases_held(c.id, processor, instance);
END
$$;

-- Moves a processor's checkpoints (all ranges, or `range_ids`) to `position`
-- (default: now), for its owner or an admin.  Every moved lease is freed with
-- a new epoch, so running instances are fenced and re-acquire from there.
-- Skipping changes this way is deliberate; the function says how many leases moved.
CREATE FUNCTION changefeed.reset_checkpoint(tbl regclass, processor text, "position" text DEFAULT NULL,
                                            range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    pos text := coalesce("position", changefeed.current_position());
    n int;
BEGIN
    PERFORM changefeed.position_decode(pos);
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

-- Forgets a processor: its leases, checkpoints, registered instances,
-- deduplication store (47_dedup.sql) and owner (for its owner or an admin).
CREATE FUNCTION changefeed.drop_processor(tbl regclass, processor text) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
BEGIN
    DELETE FROM changefeed.applied a WHERE a.collection_id = c.id AND a.processor = processor;
    DELETE FROM changefeed.lease l WHERE l.collection_id = c.id AND l.processor = processor;
    DELETE FROM changefeed.instance i WHERE i.collection_id = c.id AND i.processor = processor;
    DELETE FROM changefeed.processor p WHERE p.collection_id = c.id AND p.name = processor;
    RETURN FOUND;
END
$$;
-- changefeed: the live instances of each processor.
--
-- Leases are filed under instance names, so two processes running under one
-- name would each take the other's leases for their own and both read every
-- range.  An instance registers its name with the session it renews its
-- leases on; a second instance under a name whose session is still alive is
-- refused (CF015).  A name whose session is gone (the process crashed, its
-- connection died) is taken over at once: a restarted service under the same
-- name does not wait for an expiry.  Liveness is the session itself (its pid
-- and start time in pg_stat_activity), never a clock.

-- Not dumped: sessions of another cluster mean nothing after a restore.
CREATE TABLE changefeed.instance (
    collection_id  int NOT NULL REFERENCES changefeed.collection (id) ON DELETE CASCADE,
    processor      text NOT NULL,
    instance       text NOT NULL,
    token          text NOT NULL,          -- chosen by the instance at each start
    backend_pid    int NOT NULL,           -- the session it registered from
    backend_start  timestamptz,
    registered_at  timestamptz NOT NULL DEFAULT now(),
    heartbeat_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, processor, instance)
);

-- Whether the session `pid` that started at `started` still runs.  A pid
-- reused by a later session does not count.  When the start time cannot be
-- seen (the extension's owner may not read other roles' statistics) an
-- existing pid counts as alive: refusing a name wrongly is safer than letting
-- two instances share it.
CREATE FUNCTION changefeed.session_alive(pid int, started timestamptz) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity($1) a
                    WHERE a.pid = $1
                      AND (a.backend_start IS NULL OR $2 IS NULL OR a.backend_start = $2))
$$;

-- The registered instances of a processor that count for balancing: those
-- registered from a session that is still alive (an instance registers
-- before its first acquire, so instances started together see each other),
-- and `instance` itself.  lease_acquire() adds the owners of unexpired
-- leases (a registration may be gone while its instance still renews).
CREATE FUNCTION changefeed.live_instances(collection_id int, processor text, instance text)
RETURNS SETOF text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT i.instance FROM changefeed.instance i
     WHERE i.collection_id = $1 AND i.processor = $2
       AND changefeed.session_alive(i.backend_pid, i.backend_start)
    UNION
    SELECT $3
$$;

-- Registers `instance` of processor `processor` for the calling session,
-- under `token` (the instance's own, new at each start).  Raises CF015 when
-- another token holds the name from a session that is still alive.
-- Registering again with the same token (after a reconnect) moves the
-- registration to the calling session.  When the name changes hands, the
-- leases still filed under it get a new epoch: whatever of the previous
-- holder still runs can no longer checkpoint them.
CREATE FUNCTION changefeed.instance_register(tbl regclass, processor text, instance text, token text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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

-- Removes the registration if `token` still holds it; returns whether it did.
CREATE FUNCTION changefeed.instance_unregister(tbl regclass, processor text, instance text, token text)
RETURNS bool LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    DELETE FROM changefeed.instance i
     WHERE i.collection_id = c.id AND i.processor = processor AND i.instance = instance
       AND i.token = token;
    RETURN FOUND;
END
$$;

-- The registered instances of a processor, and whether their session is alive.
CREATE FUNCTION changefeed.instances(tbl regclass, processor text)
RETURNS TABLE (instance text, registered_at timestamptz, heartbeat_at timestamptz, live bool)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
BEGIN
    RETURN QUERY
    SELECT i.instance, i.registered_at, i.heartbeat_at, changefeed.session_alive(i.backend_pid, i.backend_start)
      FROM changefeed.instance i
     WHERE i.collection_id = c.id AND i.processor = processor
     ORDER BY i.instance;
END
$$;
-- changefeed: backfill, the scan of a table's current rows that precedes its
-- log when a processor starts from the beginning or resyncs a range.  The
-- scan's progress is kept in the range's lease (40_leases.sql,
-- lease_backfill_checkpoint()).

-- One keyset page of a range's current rows for a backfill: the rows whose
-- primary key is greater than `after` (a jsonb object of the key columns;
-- null = from the start), in key order.  doc_id and partition_key are
-- formatted as the capture trigger formats them.
CREATE FUNCTION changefeed.backfill_page(tbl regclass, range_id int, after jsonb, max_rows int DEFAULT 1000)
RETURNS TABLE (doc_id text, partition_key text, key jsonb, current jsonb)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    keys text := '';
    key_obj text := '';
    doc text;
    part text;
    rowtype text;
    col text;
    i int := 0;
    bound text[];
    tenant_cond text := 'true';
BEGIN
    IF range_id IS NULL OR range_id < 0 OR range_id >= c.ranges THEN
        RAISE EXCEPTION 'range id must be between 0 and %', c.ranges - 1 USING ERRCODE = 'CF003';
    END IF;
    IF max_rows IS NULL OR max_rows < 1 OR max_rows > 100000 THEN
        RAISE EXCEPTION 'max_rows must be between 1 and 100000, not %', coalesce(max_rows::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    IF after IS NOT NULL AND jsonb_typeof(after) <> 'object' THEN
        RAISE EXCEPTION 'after must be a jsonb object of the key columns' USING ERRCODE = 'CF003';
    END IF;
    -- This runs as the caller (SELECT on the table, its row-level security):
    -- a role bound to tenants scans only theirs.
    bound := changefeed.bound_tenants();
    IF cardinality(bound) > 0 THEN
        IF c.tenant_column IS NULL THEN
            RAISE EXCEPTION 'permission denied to read %', tbl
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'The role is bound to a tenant and the table has no tenant column.';
        END IF;
        tenant_cond := format('t.%I::text = ANY ($5)', c.tenant_column);
    END IF;
    rowtype := format('%s', tbl);
    FOREACH col IN ARRAY c.key_columns LOOP
        i := i + 1;
        keys := keys || CASE WHEN i > 1 THEN ', ' ELSE '' END || format('t.%I', col);
        key_obj := key_obj || CASE WHEN i > 1 THEN ', ' ELSE '' END || format('%L, t.%I', col, col);
    END LOOP;
    IF cardinality(c.key_columns) = 1 THEN
        doc := format('coalesce(t.%I::text, %L)', c.key_columns[1], '');
    ELSE
        doc := '''['' || concat_ws('','', '
            || (SELECT string_agg(format('coalesce(to_json(t.%I::text)::text, %L)', k, 'null'), ', ')
                  FROM unnest(c.key_columns) k)
            || ') || '']''';
    END IF;
    part := (SELECT string_agg(format('coalesce(t.%I::text, %L)', k, ''), ' || ''/'' || ')
               FROM unnest(c.partition_key) k);
    RETURN QUERY EXECUTE format(
        'SELECT %s, %s, jsonb_build_object(%s), to_jsonb(t) FROM %s t'
        ' WHERE changefeed.range_of(%s, $1) = $2'
        '   AND ($3 IS NULL OR (%s) > (SELECT %s FROM jsonb_populate_record(NULL::%s, $3) t))'
        '   AND %s'
        ' ORDER BY %s LIMIT $4',
        doc, part, key_obj, rowtype, part, keys, keys, rowtype, tenant_cond, keys)
    USING c.ranges, range_id, after, max_rows, bound;
END
$$;

-- Estimated number of rows of a table, for backfill progress.
CREATE FUNCTION changefeed.estimated_rows(tbl regclass) RETURNS bigint
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    SELECT reltuples::bigint INTO n FROM pg_class WHERE oid = tbl;
    IF n IS NULL OR n < 0 THEN
        EXECUTE format('SELECT count(*) FROM %s', tbl) INTO n;
    END IF;
    RETURN n;
END
$$;
-- changefeed: the deduplication store of projector processors.
--
-- A projector processor records the event ids (read()'s event_id) of the
-- changes it applied, after applying them and before its checkpoint, and asks
-- which of a batch are recorded before applying it: a redelivered change that
-- is recorded is not applied again.  Rows live as long as the log's retention
-- of their collection (a change older than that cannot be redelivered) and go
-- with their processor.  Not dumped (no pg_extension_config_dump): in a
-- restored database the checkpoints are foreign positions, so the processors
-- rebuild (history lost, resync) under new ids and old ones would only take room.

CREATE TABLE changefeed.applied (
    collection_id int REFERENCES changefeed.collection (id) ON DELETE CASCADE,
    processor     text,
    event_id      text,
    applied_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, processor, event_id)
);

-- Checks an array of event ids: not null, no null element, at most 100000.
CREATE FUNCTION changefeed.check_event_ids(event_ids text[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF event_ids IS NULL OR array_position(event_ids, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'event ids must not be null' USING ERRCODE = 'CF003';
    END IF;
    IF cardinality(event_ids) > 100000 THEN
        RAISE EXCEPTION 'at most 100000 event ids at a time, not %', cardinality(event_ids)
            USING ERRCODE = 'CF003';
    END IF;
END
$$;

-- Which of `event_ids` processor `processor` recorded as applied (for its
-- owner or an admin).
CREATE FUNCTION changefeed.dedup_applied(tbl regclass, processor text, event_ids text[])
RETURNS SETOF text LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
BEGIN
    PERFORM changefeed.check_event_ids(event_ids);
    RETURN QUERY
        SELECT a.event_id FROM changefeed.applied a
         WHERE a.collection_id = c.id AND a.processor = processor AND a.event_id = ANY (event_ids);
END
$$;

-- Records `event_ids` as applied by processor `processor`; returns how many
-- were new.
CREATE FUNCTION changefeed.dedup_record(tbl regclass, processor text, event_ids text[])
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    n int;
BEGIN
    PERFORM changefeed.check_event_ids(event_ids);
    INSERT INTO changefeed.applied AS a (collection_id, processor, event_id)
    SELECT c.id, processor, e FROM unnest(event_ids) e
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;

-- A maintenance step: deletes what was applied before the retention of its
-- collection at `as_of` (its change can no longer be redelivered).  Returns
-- how many rows it deleted.
CREATE FUNCTION changefeed.prune_applied(as_of timestamptz) RETURNS bigint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM changefeed.require_finite(as_of, 'as_of');
    DELETE FROM changefeed.applied a
     USING changefeed.collection c
     WHERE c.id = a.collection_id AND a.applied_at < as_of - c.retention;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END
$$;
-- changefeed: retention, history loss, TTL, changing options.
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

-- Raises CF006 when retention dropped changes that a reader at `lo` has not read.
CREATE FUNCTION changefeed.check_history(c changefeed.collection, lo pg_snapshot) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
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
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO changefeed.horizon AS h (collection_id, dropped_txid, dropped_before)
    VALUES (collection_id, upto, written_before)
    ON CONFLICT (collection_id) DO UPDATE
       SET dropped_txid = greatest(h.dropped_txid, excluded.dropped_txid),
           dropped_before = greatest(h.dropped_before, excluded.dropped_before),
           dropped_at = now()
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
    FOR c IN SELECT * FROM changefeed.collection WHERE ttl_column IS NOT NULL ORDER BY id LOOP
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

    FOR c IN SELECT id, relid FROM changefeed.collection WHERE ttl_column IS NOT NULL ORDER BY id LOOP
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

-- Changes a collection's retention or previous images.  (The ranges and the
-- partition key are fixed: changing them would move documents between ranges
-- under running consumers.)
CREATE FUNCTION changefeed.alter(tbl regclass, retention interval DEFAULT NULL,
                                 keep_previous bool DEFAULT NULL, ttl_column text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
-- changefeed: lag of a processor, per range.
--
-- pending counts the changes after the range's checkpoint by reading them,
-- up to `count_limit` (default 10000): below the limit the count is exact,
-- at the limit it is a lower bound (pending_exact = false).  retention_used is
-- the share of the collection's retention that the oldest pending change has
-- used: at 1.0 retention starts dropping what the processor has not read.
CREATE FUNCTION changefeed.lag(tbl regclass, processor text, count_limit int DEFAULT 10000)
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
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    l changefeed.lease;
BEGIN
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
            SELECT count(*), min(r.written_at) INTO pending, oldest_pending
              FROM changefeed.read(tbl, l.checkpoint, count_limit, ARRAY[l.range_id]) r;
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

-- What retention dropped, per collection whose table the querying role may SELECT.
CREATE VIEW changefeed.horizons WITH (security_barrier) AS
SELECT c.relid AS table_name, h.collection_id, h.dropped_txid, h.dropped_before, h.dropped_at
  FROM changefeed.horizon h JOIN changefeed.collection c ON c.id = h.collection_id
 WHERE pg_catalog.has_table_privilege(c.relid, 'SELECT');
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
               'reset_checkpoint', 'drop_processor', 'instance_register', 'instance_unregister', 'instances',
               'position_at', 'dedup_applied', 'dedup_record', 'bind_tenant', 'unbind_tenant', 'bound_tenants'])
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
    changefeed.disable(regclass),
    changefeed.alter(regclass, interval, bool, text)
    TO changefeed_reader;
GRANT SELECT ON changefeed.collections, changefeed.horizons TO changefeed_reader;

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
    changefeed.unbind_tenant(regrole)
    TO changefeed_admin;
GRANT SELECT ON changefeed.tenant_bindings TO changefeed_admin;
