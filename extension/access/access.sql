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

-- The role that called the innermost entry point (see extension/access/caller.cpp).
CREATE OR REPLACE FUNCTION changefeed.caller() RETURNS oid
    AS 'MODULE_PATHNAME', 'changefeed_caller' LANGUAGE C STABLE PARALLEL RESTRICTED;

-- Processors belong to the role that first started them on a collection:
-- lease and checkpoint calls for it from another role fail (admin excepted).
CREATE TABLE changefeed.processor (
    collection_id int NOT NULL REFERENCES changefeed.collection (id) ON DELETE CASCADE,
    name          text NOT NULL,
    owner_role    regrole NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    -- Moves on with every change of a lease's owner or epoch (leases_moved(),
    -- processors/leases.sql): a balancing step or renewal that finds it where it was
    -- answers "unchanged" without reading the leases.
    lease_generation bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (collection_id, name)
);

-- Roles bound to one tenant: every read by them returns only that tenant's changes.
CREATE TABLE changefeed.tenant_binding (
    role_id  regrole PRIMARY KEY,
    tenant   text NOT NULL
);

-- Whether `who` may administer every collection and processor.
CREATE OR REPLACE FUNCTION changefeed.is_admin(who oid) RETURNS bool
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_has_role(who, 'changefeed_admin', 'USAGE')
$$;

CREATE OR REPLACE FUNCTION changefeed.role_name(who oid) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT quote_ident(rolname) FROM pg_roles WHERE oid = who), who::text)
$$;

-- 42501 unless `who` owns `tbl` (has its owner's privileges) or is an admin.
CREATE OR REPLACE FUNCTION changefeed.require_table_owner(tbl regclass, who oid, action text) RETURNS void
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

-- The tenants a call by `who` is bound to (empty: unbound).  A binding of
-- role R holds for the call when `who` (the caller: the current user at the
-- entry point) or the session user is a member of R, directly or not, with
-- or without INHERIT; superusers are never bound.  The session user counts
-- so that a bound login cannot widen itself with SET ROLE to a role it is a
-- member of, nor through a SECURITY DEFINER function of another role: SET
-- SESSION AUTHORIZATION takes a superuser, and a non-superuser's session user
-- is the one it logged in as.  Binding several roles a session acts as binds
-- it to all their tenants.
-- PL/pgSQL, not SQL: every read asks, and a session plans this once instead
-- of once per statement.
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

-- The tenants the calling role is bound to (empty: unbound).
CREATE OR REPLACE FUNCTION changefeed.bound_tenants() RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT changefeed.tenants_of(changefeed.caller())
$$;

-- The tenants a read by `who` may return: null = all.  42501 when `who` may
-- not read `tbl`'s feed: it needs SELECT on the table, or on some of its
-- columns, the key and partition key columns among them (the read then
-- delivers only those columns, extension/access/reader_sight.cpp, and applies the
-- table's row-level security as `who`); a role bound to tenants reads only
-- those, and only collections with a tenant column.
CREATE OR REPLACE FUNCTION changefeed.require_read(tbl regclass, who oid, tenant_column text, wanted text)
RETURNS text[]
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    bound text[] := changefeed.tenants_of(who);
    missing text[];
BEGIN
    IF NOT has_table_privilege(who, tbl, 'SELECT') THEN
        IF NOT has_any_column_privilege(who, tbl, 'SELECT') THEN
            RAISE EXCEPTION 'permission denied to read the change feed of %', tbl
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = format('Reading a feed needs SELECT on its table; %s does not have it.',
                                      changefeed.role_name(who));
        END IF;
        -- Every change carries its key (doc_id) and partition key.
        SELECT array_agg(DISTINCT k ORDER BY k) INTO missing
          FROM changefeed.collection c, unnest(c.key_columns || c.partition_key) k
         WHERE c.relid = tbl AND NOT has_column_privilege(who, tbl, k, 'SELECT');
        IF missing IS NOT NULL THEN
            RAISE EXCEPTION 'permission denied to read the change feed of %', tbl
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = format('%s may SELECT only some columns of the table; reading its feed needs SELECT '
                                      'on its key columns too, and it lacks it on %s.',
                                      changefeed.role_name(who), array_to_string(missing, ', ')),
                      HINT = format('GRANT SELECT (%s) ON %s TO %s.',
                                    array_to_string(ARRAY(SELECT quote_ident(m) FROM unnest(missing) m), ', '),
                                    tbl, changefeed.role_name(who));
        END IF;
    END IF;
    IF wanted IS NOT NULL AND tenant_column IS NULL THEN
        RAISE EXCEPTION 'table % has no tenant column', tbl
            USING ERRCODE = 'CF003', HINT = 'Enable it with tenant_column => ... to read by tenant.';
    END IF;
    -- Asking for a tenant filters on the tenant column: a column it must see.
    IF wanted IS NOT NULL AND NOT has_column_privilege(who, tbl, tenant_column, 'SELECT') THEN
        RAISE EXCEPTION 'permission denied for column % of %', quote_ident(tenant_column), tbl
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('A read by tenant filters on the tenant column, which %s may not SELECT.',
                                  changefeed.role_name(who));
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

-- The role owning processor `name` on collection `collection_id`, or null.
-- `lock` 'share' (a call that files something under the name) locks its row
-- FOR KEY SHARE, 'exclusive' (reserve_processor, drop_processor) FOR UPDATE,
-- which waits for every share in flight; 'none' reads it (a read-only call,
-- which may run on a standby).  A locked row is read as it is now: in READ
-- COMMITTED a row a reservation replaced while we waited is read again in a
-- new snapshot; under REPEATABLE READ the lock fails with 40001 on a row
-- replaced after the transaction's snapshot (reserve_processor deletes and
-- inserts it, so that even KEY SHARE sees the change).  Without a lock the
-- name could be claimed in an old snapshot after a reservation dropped it.
CREATE OR REPLACE FUNCTION changefeed.processor_owner(collection_id int, name text, lock text) RETURNS oid
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    owner oid;
BEGIN
    FOR attempt IN 1..2 LOOP
        IF lock = 'share' THEN
            SELECT p.owner_role INTO owner FROM changefeed.processor p
             WHERE p.collection_id = collection_id AND p.name = name FOR KEY SHARE;
        ELSIF lock = 'exclusive' THEN
            SELECT p.owner_role INTO owner FROM changefeed.processor p
             WHERE p.collection_id = collection_id AND p.name = name FOR UPDATE;
        ELSE
            SELECT p.owner_role INTO owner FROM changefeed.processor p
             WHERE p.collection_id = collection_id AND p.name = name;
            RETURN owner;
        END IF;
        IF FOUND THEN
            RETURN owner;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

-- 42501 unless `who` is `owner` (a member of it) or an admin.
CREATE OR REPLACE FUNCTION changefeed.require_owner(tbl regclass, name text, who oid, owner oid) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
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

-- CF012: nothing is filed under a name before lease_init() claimed it, else
-- a stranger could fill a processor's deduplication store or register
-- phantom instances under it before its owner starts.
CREATE OR REPLACE FUNCTION changefeed.processor_unknown(tbl regclass, name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'processor "%" has never run on %', name, tbl
        USING ERRCODE = 'CF012',
              DETAIL = 'Leases, instances, checkpoints and deduplication records are filed only under a '
                       'processor name that changefeed.lease_init() claimed for its role.',
              HINT = 'Start the processor first (the client calls lease_init() in start()).';
END
$$;

-- CF018 when `who` owns changefeed.max_processors_per_role names on the
-- collection already: names are cheap to claim for anyone who may read the
-- table, and monitoring and the reservation of names scale with them.
CREATE OR REPLACE FUNCTION changefeed.check_processor_cap(tbl regclass, collection_id int, who oid) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    cap int := coalesce(current_setting('changefeed.max_processors_per_role', true)::int, 100);
BEGIN
    -- One new name of a role on a collection at a time, so that sessions
    -- claiming together do not each count the same names and overshoot.
    PERFORM pg_advisory_xact_lock(hashtextextended(format('changefeed.processor_cap %s %s', collection_id, who), 0));
    IF (SELECT count(*) FROM (SELECT 1 FROM changefeed.processor p
                               WHERE p.collection_id = collection_id AND p.owner_role = who
                               LIMIT cap) x) >= cap THEN
        RAISE EXCEPTION 'processor name cap of % reached for role % on %', cap, changefeed.role_name(who), tbl
            USING ERRCODE = 'CF018',
                  DETAIL = 'changefeed.max_processors_per_role limits the processor names one role claims per table.',
                  HINT = 'Drop processors no longer used (changefeed.drop_processor()), or ask the '
                         'server''s administrator to raise changefeed.max_processors_per_role.';
    END IF;
END
$$;

-- 42501 unless `who` owns processor `name` on collection `collection_id`
-- (or is an admin); CF012 when no role claimed the name yet.  With `claim`,
-- an unknown processor becomes `who`'s (a name an admin reserved is the
-- reserving role's already: reserve_processor()).  What a call files under
-- the name after this holds the processor row's share lock until commit, so
-- a reservation waits for it and then removes it (processor_owner).
CREATE OR REPLACE FUNCTION changefeed.require_processor(tbl regclass, collection_id int, name text, who oid,
                                                        claim bool DEFAULT false) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    owner oid := changefeed.processor_owner(collection_id, name, 'share');
BEGIN
    IF owner IS NULL THEN
        IF NOT claim THEN
            PERFORM changefeed.processor_unknown(tbl, name);
        END IF;
        PERFORM changefeed.check_processor_cap(tbl, collection_id, who);
        -- Waits for a concurrent first claim or reservation of the name;
        -- under REPEATABLE READ one committed after the snapshot is 40001.
        INSERT INTO changefeed.processor AS p (collection_id, name, owner_role)
        VALUES (collection_id, name, who::regrole)
        ON CONFLICT ON CONSTRAINT processor_pkey DO NOTHING;
        owner := changefeed.processor_owner(collection_id, name, 'share');
        IF owner IS NULL THEN   -- dropped meanwhile
            PERFORM changefeed.processor_unknown(tbl, name);
        END IF;
    END IF;
    PERFORM changefeed.require_owner(tbl, name, who, owner);
END
$$;

-- require_processor() for a call that only reads what is filed under the
-- name (lag, instances, deduplication lookups): no lock, so it runs on a
-- standby too.
CREATE OR REPLACE FUNCTION changefeed.require_processor_read(tbl regclass, collection_id int, name text, who oid)
RETURNS void LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    owner oid := changefeed.processor_owner(collection_id, name, 'none');
BEGIN
    IF owner IS NULL THEN
        PERFORM changefeed.processor_unknown(tbl, name);
    END IF;
    PERFORM changefeed.require_owner(tbl, name, who, owner);
END
$$;

-- 42501 unless `who` may SELECT from `tbl`: what a processor files (leases,
-- instances, checkpoints, deduplication records) stays with roles that may
-- read the table.
CREATE OR REPLACE FUNCTION changefeed.require_select(tbl regclass, who oid, action text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT has_table_privilege(who, tbl, 'SELECT') THEN
        RAISE EXCEPTION 'permission denied to % %', action, tbl
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('That needs SELECT on %s; %s does not have it.', tbl, changefeed.role_name(who));
    END IF;
END
$$;

-- Whether `who` may delete rows of `tbl` itself: it has its owner's
-- privileges or DELETE on it.  Being an admin is not enough: nothing the
-- extension deletes for a role (TTL) may reach rows that role could not delete.
CREATE OR REPLACE FUNCTION changefeed.may_delete_rows(tbl regclass, who oid) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT pg_has_role(who, (SELECT relowner FROM pg_class WHERE oid = tbl), 'USAGE')
        OR has_table_privilege(who, tbl, 'DELETE')
$$;

-- 42501 unless may_delete_rows(tbl, who).
CREATE OR REPLACE FUNCTION changefeed.require_delete_rows(tbl regclass, who oid, action text) RETURNS void
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

-- 42501 unless `who` is an admin.
CREATE OR REPLACE FUNCTION changefeed.require_admin(who oid, action text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT changefeed.is_admin(who) THEN
        RAISE EXCEPTION 'permission denied to %', action
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('Only members of changefeed_admin may; %s is not one.', changefeed.role_name(who));
    END IF;
END
$$;

-- Held by every bound role: EXECUTE on this function, granted by
-- bind_tenant(), is a shared dependency of the role, so DROP ROLE refuses a
-- bound role in any database of the cluster (naming this function) until
-- unbind_tenant() revokes it.  No binding outlives its role, and a new role
-- that gets a dead one's OID inherits nothing.  Calling it does nothing.
CREATE OR REPLACE FUNCTION changefeed.tenant_binding_held() RETURNS void
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$ $$;

-- Whether role `who` holds the grant above itself (not through a membership).
CREATE OR REPLACE FUNCTION changefeed.holds_binding_grant(who oid) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_proc p, aclexplode(p.proacl) a
                    WHERE p.oid = 'changefeed.tenant_binding_held()'::regprocedure
                      AND a.grantee = who AND a.privilege_type = 'EXECUTE')
$$;

-- Binds `who` to one tenant (admin only): its reads then return only that
-- tenant's changes, whatever they ask, and so do those of every role and
-- session acting as a member of it (tenants_of).  Binding again replaces the
-- tenant.
CREATE OR REPLACE FUNCTION changefeed.bind_tenant(who regrole, tenant text) RETURNS void
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
    EXECUTE format('GRANT EXECUTE ON FUNCTION changefeed.tenant_binding_held() TO %s', who);
END
$$;

CREATE OR REPLACE FUNCTION changefeed.unbind_tenant(who regrole) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
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
CREATE OR REPLACE FUNCTION changefeed.keep_bindings() RETURNS event_trigger
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

CREATE OR REPLACE VIEW changefeed.tenant_bindings AS
SELECT b.role_id AS role_name, b.tenant FROM changefeed.tenant_binding b;

SELECT pg_catalog.pg_extension_config_dump('changefeed.processor', '');
SELECT pg_catalog.pg_extension_config_dump('changefeed.tenant_binding', '');
