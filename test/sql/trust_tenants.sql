-- Tenant bindings that hold, tenant moves, and implementations that keep the
-- caller, tried as the non-superuser roles of a shared database: a table
-- owner (app), a group role with SELECT (analytics) whose members are the
-- bound logins tenant_a and tenant_b, processors (svc, and svc_a bound to
-- tenant a), an admin.  Roles are cluster-wide: every one made here is
-- dropped at the end.
SET client_min_messages = warning;
CREATE ROLE regress_tt_app LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_tt_analytics NOLOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_tt_tenant_a LOGIN IN ROLE regress_tt_analytics;
CREATE ROLE regress_tt_tenant_b LOGIN IN ROLE regress_tt_analytics;
CREATE ROLE regress_tt_svc LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_tt_svc_a LOGIN IN ROLE changefeed_processor, regress_tt_analytics;
CREATE ROLE regress_tt_admin LOGIN IN ROLE changefeed_admin;
GRANT CREATE ON SCHEMA public TO regress_tt_app;
RESET client_min_messages;

SET ROLE regress_tt_app;
CREATE TABLE public.tt_orders (id int PRIMARY KEY, tenant text, amount int);
SELECT changefeed.enable('public.tt_orders', tenant_column => 'tenant') > 0 AS enabled;
GRANT SELECT ON public.tt_orders TO regress_tt_analytics, regress_tt_svc;
-- A function of app's that reads the feed as app (SECURITY DEFINER).
CREATE FUNCTION public.tt_read_as_app(since text) RETURNS TABLE (tenant text, n bigint)
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT r.tenant, count(*) FROM changefeed.read('public.tt_orders', since) r GROUP BY 1 ORDER BY 1
$$;
GRANT EXECUTE ON FUNCTION public.tt_read_as_app(text) TO PUBLIC;
RESET ROLE;
SET ROLE regress_tt_admin;
SELECT changefeed.bind_tenant('regress_tt_tenant_a', 'a'), changefeed.bind_tenant('regress_tt_tenant_b', 'b'),
       changefeed.bind_tenant('regress_tt_svc_a', 'a');
RESET ROLE;
-- Processors started before the writes: their lag counts them.
SET ROLE regress_tt_svc;
SELECT changefeed.lease_init('public.tt_orders', 'billing') AS leases;
RESET ROLE;
SET ROLE regress_tt_svc_a;
SELECT changefeed.lease_init('public.tt_orders', 'projector') AS leases;
RESET ROLE;
CREATE TEMP TABLE tt_pos AS SELECT changefeed.current_position() AS p;
GRANT SELECT ON tt_pos TO PUBLIC;
SET ROLE regress_tt_app;
INSERT INTO public.tt_orders VALUES (1, 'a', 10), (2, 'b', 20), (3, 'b', 30), (4, 'c', 40);
RESET ROLE;

-- Hole 1: a bound login that sets a role it is a member of stays bound.  Its
-- session user is bound, so SET ROLE, a SECURITY DEFINER function of an
-- unbound role, or read_ranges() all read tenant a only.
SET SESSION AUTHORIZATION regress_tt_tenant_a;
SELECT tenant, count(*) FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos)) GROUP BY 1 ORDER BY 1;
SET ROLE regress_tt_analytics;
SELECT current_user, session_user, changefeed.bound_tenants();
SELECT tenant, count(*) FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos)) GROUP BY 1 ORDER BY 1;
SELECT tenant, count(*) FROM changefeed.read_ranges('public.tt_orders', '{0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15}',
       array_fill((SELECT p FROM tt_pos), ARRAY[16])) WHERE seq IS NOT NULL GROUP BY 1 ORDER BY 1;
SELECT try($$SELECT count(*) FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos), tenant => 'b')$$);
SELECT * FROM public.tt_read_as_app((SELECT p FROM tt_pos));
RESET ROLE;
SELECT * FROM public.tt_read_as_app((SELECT p FROM tt_pos));
RESET SESSION AUTHORIZATION;
-- The group role itself is not bound: a member that is not bound reads all,
-- and so does a superuser's session that sets it.
SET ROLE regress_tt_analytics;
SELECT tenant, count(*) FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos)) GROUP BY 1 ORDER BY 1;
RESET ROLE;
-- A superuser's session that sets a bound role is bound as well.
SET ROLE regress_tt_tenant_b;
SELECT tenant, count(*) FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos)) GROUP BY 1 ORDER BY 1;
RESET ROLE;

-- Hole 3: lag() counts with the caller's rights, as read() does: a bound
-- processor counts its tenant's changes only.
SET ROLE regress_tt_svc_a;
SELECT count(*) AS read_sees FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos));
SELECT sum(pending) AS lag_counts FROM changefeed.lag('public.tt_orders', 'projector');
RESET ROLE;
SET ROLE regress_tt_svc;
SELECT sum(pending) AS lag_counts FROM changefeed.lag('public.tt_orders', 'billing');
RESET ROLE;
-- After REVOKE SELECT, the processor's lag is refused like its read.
SET ROLE regress_tt_app;
REVOKE SELECT ON public.tt_orders FROM regress_tt_svc;
RESET ROLE;
SET ROLE regress_tt_svc;
SELECT try($$SELECT count(*) FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos))$$);
SELECT try($$SELECT sum(pending) FROM changefeed.lag('public.tt_orders', 'billing')$$);
RESET ROLE;
SET ROLE regress_tt_app;
GRANT SELECT ON public.tt_orders TO regress_tt_svc;
RESET ROLE;

-- No implementation calls an entry point: one that did would check the
-- extension's owner instead of its caller.  Implementations are the SECURITY
-- DEFINER functions and the helpers none of the extension's roles may
-- execute (only implementations reach them); entry points are the C
-- functions that hand a call to `_<name>`.  Calls are looked for in the code
-- without its comments and string literals (messages name entry points).
CREATE FUNCTION tt_entry_point_callers() RETURNS TABLE (caller regprocedure, calls text)
LANGUAGE sql AS $$
    SELECT f.oid::regprocedure, e.proname::text
      FROM (SELECT p.*, regexp_replace(regexp_replace(p.prosrc, '--[^\n]*', '', 'g'),
                                       '''([^'']|'''')*''', '''''', 'g') AS code
              FROM pg_proc p) f
      JOIN pg_language l ON l.oid = f.prolang
      JOIN pg_proc e ON e.pronamespace = f.pronamespace AND e.prosrc = 'changefeed_call_definer'
     WHERE f.pronamespace = 'changefeed'::regnamespace AND l.lanname IN ('sql', 'plpgsql')
       AND (f.prosecdef OR NOT EXISTS (
               SELECT 1 FROM aclexplode(coalesce(f.proacl, acldefault('f', f.proowner))) a
                WHERE a.grantee IN (SELECT oid FROM pg_roles
                                     WHERE rolname IN ('changefeed_reader', 'changefeed_processor', 'changefeed_admin'))))
       AND f.code ~ ('changefeed\s*\.\s*"?' || e.proname || '"?\s*\(')
     ORDER BY 1, 2
$$;
SELECT * FROM tt_entry_point_callers();
-- The check finds one that does.
CREATE FUNCTION changefeed._tt_counts_as_owner(tbl regclass) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(*) FROM changefeed.read(tbl, changefeed.current_position())
$$;
SELECT * FROM tt_entry_point_callers();
DROP FUNCTION changefeed._tt_counts_as_owner(regclass);

-- Hole 2: a row that moves from tenant a to tenant b is a delete for a (its
-- old image only) and a create for b (no image from before); readers of all
-- tenants see the replace.
CREATE TEMP TABLE tt_pos2 AS SELECT changefeed.current_position() AS p;
GRANT SELECT ON tt_pos2 TO PUBLIC;
SET ROLE regress_tt_app;
UPDATE public.tt_orders SET tenant = 'b' WHERE id = 1;
UPDATE public.tt_orders SET amount = 21 WHERE id = 2;          -- stays in b
UPDATE public.tt_orders SET tenant = NULL WHERE id = 3;        -- b to no tenant
UPDATE public.tt_orders SET tenant = 'a', amount = 31 WHERE id = 3;   -- no tenant to a
RESET ROLE;
SELECT op, tenant, previous_tenant FROM changefeed.log
 WHERE collection_id = (changefeed.collection_of('public.tt_orders')).id
   AND seq > (SELECT max(seq) - 4 FROM changefeed.log) ORDER BY seq;
-- The two sides of a move are two events: their ids end in .delete and
-- .create (tenant-scoped bridges may publish both to one stream).
SET SESSION AUTHORIZATION regress_tt_tenant_a;
SELECT doc_id, operation, tenant, current, previous, substring(event_id from '[.][a-z]+$') AS side
  FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2)) ORDER BY seq;
-- The same through the jsonpath reader, read_ranges() and mode 'latest'.
SELECT doc_id, operation, tenant, current, previous, substring(event_id from '[.][a-z]+$') AS side
  FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2), filter => '$.amount > 0') ORDER BY seq;
SELECT doc_id, operation, tenant, current, previous
  FROM changefeed.read_ranges('public.tt_orders', '{0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15}',
       array_fill((SELECT p FROM tt_pos2), ARRAY[16])) WHERE seq IS NOT NULL ORDER BY seq;
SELECT doc_id, operation, tenant FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2), mode => 'latest')
 ORDER BY seq;
SELECT doc_id, operation, tenant FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2), mode => 'latest',
                                                      filter => '$.amount > 0') ORDER BY seq;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_tt_tenant_b;
SELECT doc_id, operation, tenant, current, previous, substring(event_id from '[.][a-z]+$') AS side
  FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2)) ORDER BY seq;
SELECT doc_id, operation, tenant, current, previous
  FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2), filter => '$.amount > 0') ORDER BY seq;
SELECT doc_id, operation, tenant FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2), mode => 'latest')
 ORDER BY seq;
RESET SESSION AUTHORIZATION;
-- A role bound to both tenants (a member of both bound logins) sees the move
-- between them as the replace it is, and each move to or from no tenant as
-- one side.
SET client_min_messages = warning;
CREATE ROLE regress_tt_both LOGIN IN ROLE regress_tt_tenant_a, regress_tt_tenant_b;
RESET client_min_messages;
SET SESSION AUTHORIZATION regress_tt_both;
SELECT changefeed.bound_tenants();
SELECT doc_id, operation, tenant, previous IS NOT NULL AS has_previous
  FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2)) ORDER BY seq;
SELECT doc_id, operation, tenant
  FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2), tenant => 'a') ORDER BY seq;
RESET SESSION AUTHORIZATION;
DROP ROLE regress_tt_both;
-- A reader that narrows itself (tenant => ...) sees the same; one that reads
-- every tenant sees replaces.
SET ROLE regress_tt_svc;
SELECT doc_id, operation, tenant, previous IS NOT NULL AS has_previous
  FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2), tenant => 'a') ORDER BY seq;
SELECT doc_id, operation, tenant, current->>'tenant' AS now_in, previous->>'tenant' AS was_in,
       event_id ~ '^[0-9]+[.][0-9]+[.][0-9]+$' AS plain_id
  FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2)) ORDER BY seq;
SELECT doc_id, operation, tenant FROM changefeed.read('public.tt_orders', (SELECT p FROM tt_pos2),
                                                      filter => '$.amount > 0') ORDER BY seq;
RESET ROLE;
-- The processor of tenant a counts both (processor_status, its lag).
SET ROLE regress_tt_svc_a;
SELECT sum(pending_estimate) AS status_pending FROM changefeed.processor_status
 WHERE table_name = 'public.tt_orders'::regclass AND processor = 'projector';
SELECT sum(pending) AS lag_pending FROM changefeed.lag('public.tt_orders', 'projector');
RESET ROLE;

-- A dropped role leaves no binding behind: DROP ROLE refuses a bound role
-- (in any database); DROP OWNED BY it, which revokes what keeps DROP ROLE
-- from dropping it (and which the role itself may run), gives that back with
-- a warning; once unbound the role drops.
SET client_min_messages = warning;
CREATE ROLE regress_tt_gone LOGIN IN ROLE regress_tt_analytics;
RESET client_min_messages;
SET ROLE regress_tt_admin;
SELECT changefeed.bind_tenant('regress_tt_gone', 'g');
RESET ROLE;
\set VERBOSITY default
DROP ROLE regress_tt_gone;
DROP OWNED BY regress_tt_gone;
DROP ROLE regress_tt_gone;
\set VERBOSITY terse
SET ROLE regress_tt_tenant_a;
SELECT try($$DROP OWNED BY regress_tt_tenant_a$$);
RESET ROLE;
SELECT role_name, tenant FROM changefeed.tenant_bindings ORDER BY 1::text;
SET ROLE regress_tt_admin;
SELECT changefeed.unbind_tenant('regress_tt_gone');
RESET ROLE;
DROP OWNED BY regress_tt_gone;
DROP ROLE regress_tt_gone;
SELECT count(*) AS dead_bindings FROM changefeed.tenant_binding b
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = b.role_id);
-- A bound role that lost its grant some other way (a restore without
-- privileges) gets it back at the next DROP OWNED, whoever's it is.
REVOKE EXECUTE ON FUNCTION changefeed.tenant_binding_held() FROM regress_tt_tenant_b;
SET client_min_messages = warning;
CREATE ROLE regress_tt_other;
RESET client_min_messages;
DROP OWNED BY regress_tt_other;
DROP ROLE regress_tt_other;
SELECT changefeed.holds_binding_grant('regress_tt_tenant_b'::regrole) AS holds_again;
-- A role bound again keeps a single grant; unbinding twice is no error.
SET ROLE regress_tt_admin;
SELECT changefeed.bind_tenant('regress_tt_tenant_a', 'a2'), changefeed.bind_tenant('regress_tt_tenant_a', 'a');
SELECT changefeed.unbind_tenant('regress_tt_svc_a'), changefeed.unbind_tenant('regress_tt_svc_a');
RESET ROLE;

SET client_min_messages = warning;
SELECT changefeed.unbind_tenant(r) FROM unnest(ARRAY['regress_tt_tenant_a', 'regress_tt_tenant_b']::regrole[]) r;
DROP FUNCTION tt_entry_point_callers();
DROP TABLE public.tt_orders;
DROP OWNED BY regress_tt_app, regress_tt_analytics, regress_tt_tenant_a, regress_tt_tenant_b, regress_tt_svc,
              regress_tt_svc_a, regress_tt_admin;
DROP ROLE regress_tt_app, regress_tt_analytics, regress_tt_tenant_a, regress_tt_tenant_b, regress_tt_svc,
          regress_tt_svc_a, regress_tt_admin;
RESET client_min_messages;
SELECT count(*) AS bindings_left FROM changefeed.tenant_binding;
