-- Least privilege: what each role can and cannot do, tried as those roles.
-- Roles are cluster-wide, so every one made here is dropped at the end.
SET client_min_messages = warning;
CREATE ROLE regress_cf_owner LOGIN;          -- owns tables, member of changefeed_reader
CREATE ROLE regress_cf_other_owner LOGIN;    -- owns another table
CREATE ROLE regress_cf_reader LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_cf_proc1 LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_cf_proc2 LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_cf_admin LOGIN IN ROLE changefeed_admin;
CREATE ROLE regress_cf_nobody LOGIN;
CREATE ROLE regress_cf_tenant_a LOGIN IN ROLE changefeed_processor;
GRANT changefeed_reader TO regress_cf_owner, regress_cf_other_owner;
GRANT CREATE ON SCHEMA public TO regress_cf_owner, regress_cf_other_owner, regress_cf_nobody;
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO regress_cf_owner', current_database()); END $$;
RESET client_min_messages;

-- The extension's roles exist, without login; PUBLIC has nothing in the
-- schema but EXECUTE on capture_row(), which a partition's clone of the
-- capture trigger is made with (by its owner, who may be in no role of ours).
SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname LIKE 'changefeed\_%' ORDER BY 1;
SELECT p.oid::regprocedure AS public_grants
  FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE p.pronamespace = 'changefeed'::regnamespace AND a.grantee = 0;
SELECT has_schema_privilege('public', 'changefeed', 'USAGE') AS public_usage;
-- Every SQL and PL/pgSQL function pins its search_path, with pg_temp last: a
-- user's operator in public or table in pg_temp can never be picked up by code
-- that runs as the extension's owner.
SELECT p.oid::regprocedure AS unpinned
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'changefeed'::regnamespace AND l.lanname IN ('sql', 'plpgsql')
   AND NOT 'search_path=pg_catalog, pg_temp' = ANY (coalesce(p.proconfig, '{}'));
-- Every SECURITY DEFINER function of the extension, in any language, pins
-- its search_path: a definer that resolved a name with the session's path
-- would expand "$user" to itself, not to the role that called.
SELECT p.oid::regprocedure AS unpinned_definer
  FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
  JOIN pg_extension e ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid
 WHERE e.extname = 'changefeed' AND d.deptype = 'e' AND p.prosecdef
   AND NOT EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%');

-- Catalog hygiene PostgreSQL's own opr_sanity asks of every function.
SELECT p.oid::regprocedure AS immutable_but_parallel_unsafe
  FROM pg_proc p WHERE p.pronamespace = 'changefeed'::regnamespace
   AND p.provolatile = 'i' AND p.proparallel = 'u';

-- The same, tried: a user's operator in public that would run as whoever
-- resolves it there.  Code of the extension run by a superuser never does.
SET ROLE regress_cf_owner;
CREATE TABLE public.priv_escalations (who text);
GRANT INSERT ON public.priv_escalations TO PUBLIC;
CREATE FUNCTION public.evil_cat(text, int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.priv_escalations VALUES (current_user); RETURN $1; END $$;
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = int, FUNCTION = public.evil_cat);
CREATE FUNCTION public.evil_le(xid8, xid8) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.priv_escalations VALUES (current_user); RETURN true; END $$;
CREATE OPERATOR public.<= (LEFTARG = xid8, RIGHTARG = xid8, FUNCTION = public.evil_le);
RESET ROLE;
SET search_path = public, pg_catalog;
SELECT changefeed.channel_of(7), changefeed.operation_name('c'),
       changefeed.snapshot_covers('10:20:15', '12'), changefeed.current_position() IS NOT NULL AS pos;
RESET search_path;
SELECT count(*) AS priv_escalations FROM public.priv_escalations;

-- A table owner enables its own table; not another's.
SET ROLE regress_cf_owner;
CREATE TABLE public.priv_orders (id int PRIMARY KEY, tenant text NOT NULL, amount int);
CREATE TABLE public.priv_notes (id int PRIMARY KEY, body text);
SELECT changefeed.enable('public.priv_orders', tenant_column => 'tenant') > 0 AS enabled;
SELECT changefeed.enable('public.priv_notes') > 0 AS enabled;
GRANT SELECT ON public.priv_orders TO regress_cf_proc1, regress_cf_proc2, regress_cf_tenant_a, regress_cf_reader;
RESET ROLE;
SET ROLE regress_cf_other_owner;
CREATE TABLE public.priv_secrets (id int PRIMARY KEY, v text);
SELECT try($$SELECT changefeed.enable('public.priv_orders')$$);           -- not its table
SELECT try($$SELECT changefeed.disable('public.priv_orders')$$);
SELECT try($$SELECT changefeed.alter('public.priv_orders', retention => '1 day')$$);
RESET ROLE;
SET ROLE regress_cf_admin;
SELECT changefeed.enable('public.priv_secrets') > 0 AS admin_enables_any;
RESET ROLE;

-- A role with no changefeed role gets nothing at all.
SET ROLE regress_cf_nobody;
SELECT try($$SELECT changefeed.current_position()$$);
SELECT try($$SELECT count(*) FROM changefeed.collections$$);
SELECT try($$CREATE TABLE public.mine (id int PRIMARY KEY)$$);
SELECT try($$SELECT changefeed.enable('public.mine')$$);             -- needs a changefeed role
RESET ROLE;
-- Storage settings of the log are the extension owner's: no other role may
-- call the function that sets them, the admin role included.
SET ROLE regress_cf_reader;
SELECT try($$SELECT changefeed.keep_log_rows_whole('changefeed.log_default')$$);
RESET ROLE;
SET ROLE regress_cf_admin;
SELECT try($$SELECT changefeed.keep_log_rows_whole('changefeed.log_default')$$);
RESET ROLE;

-- Readers: the feed of tables they may SELECT, nothing else; no table of the
-- schema directly; no position minting; no implementation called directly.
INSERT INTO public.priv_orders VALUES (1, 'a', 10), (2, 'b', 20);
INSERT INTO public.priv_secrets VALUES (1, 'top');
CREATE TEMP TABLE pos AS SELECT changefeed.current_position() AS p;
GRANT SELECT ON pos TO PUBLIC;
INSERT INTO public.priv_orders VALUES (3, 'a', 30);
INSERT INTO public.priv_secrets VALUES (2, 'hidden');
SET ROLE regress_cf_reader;
SELECT doc_id, operation, tenant FROM changefeed.read('public.priv_orders', (SELECT p FROM pos));
SELECT try($$SELECT count(*) FROM changefeed.read('public.priv_secrets', (SELECT p FROM pos))$$);
SELECT try($$SELECT count(*) FROM changefeed.read('public.priv_notes', (SELECT p FROM pos))$$);
SELECT try($$SELECT count(*) FROM changefeed.log$$);
SELECT try($$SELECT count(*) FROM changefeed.collection$$);
SELECT try($$SELECT count(*) FROM changefeed.lease$$);
SELECT try($$SELECT count(*) FROM changefeed.horizon$$);
SELECT try($$UPDATE changefeed.lease SET checkpoint = ''$$);
SELECT try($$SELECT changefeed.position_encode('1:1:', NULL, 0)$$);
SELECT try($$SELECT * FROM changefeed._read('public.priv_orders', (SELECT p FROM pos), 10, NULL, 'all', NULL, NULL, NULL, NULL)$$);
-- The C reader checks no rights itself: called directly it would read any
-- collection, so only the implementations may run it.
SELECT try($$SELECT count(*) FROM changefeed.read_windows(
    (SELECT id FROM changefeed.collections WHERE table_name = 'public.priv_orders'::regclass), '{0}',
    pg_current_snapshot(), pg_current_snapshot(), 0, 10, NULL, NULL, false)$$);
SELECT try($$SELECT changefeed.snapshot_now()$$);
-- Neither read_ranges()'s implementation nor its plan (which reveals the
-- collection and the decoded positions) is the reader's to call.
SELECT try($$SELECT count(*) FROM changefeed._read_ranges('public.priv_orders', '{0}', ARRAY[(SELECT p FROM pos)], 10, 'all', NULL)$$);
SELECT try($$SELECT count(*) FROM changefeed.read_ranges_plan('public.priv_orders', '{0}', ARRAY[(SELECT p FROM pos)], 10, 'all', NULL)$$);
SELECT try($$SELECT changefeed.lease_init('public.priv_orders', 'reader-proc')$$);   -- not a processor role
-- The collections view lists only tables the reader may SELECT, even to a
-- leaky function (security barrier).
CREATE FUNCTION pg_temp.leak(t regclass) RETURNS bool LANGUAGE plpgsql COST 0.0001 AS $$
BEGIN RAISE NOTICE 'saw %', t; RETURN true; END $$;
SELECT table_name FROM changefeed.collections WHERE pg_temp.leak(table_name) ORDER BY 1;
SELECT table_name, channel IS NOT NULL AS has_channel FROM changefeed.collections ORDER BY 1;
SELECT try($$SELECT count(*) FROM changefeed.leases$$);   -- a processor role's view
RESET ROLE;

-- Row-level security applies to the feed as to a SELECT: without a policy
-- for the reader, it sees none of the rows (sql/row_security.sql has the rest).
ALTER TABLE public.priv_orders ENABLE ROW LEVEL SECURITY;
SET ROLE regress_cf_reader;
SELECT count(*) AS reader_reads FROM changefeed.read('public.priv_orders', (SELECT p FROM pos));
SELECT count(*) AS reader_selects FROM public.priv_orders;
RESET ROLE;
SET ROLE regress_cf_owner;   -- the owner is not subject to its policies
SELECT count(*) AS owner_reads FROM changefeed.read('public.priv_orders', (SELECT p FROM pos));
RESET ROLE;
ALTER TABLE public.priv_orders DISABLE ROW LEVEL SECURITY;

-- Processors belong to the role that first started them.
SET ROLE regress_cf_proc1;
SELECT changefeed.lease_init('public.priv_orders', 'billing');
SELECT count(*) AS taken FROM changefeed.lease_acquire('public.priv_orders', 'billing', 'p1', '1 minute');
SELECT count(*) AS visible_leases FROM changefeed.leases;
RESET ROLE;
INSERT INTO public.priv_orders SELECT g, 'a', g FROM generate_series(10, 50) g;
SET ROLE regress_cf_proc2;
SELECT try($$SELECT changefeed.lease_init('public.priv_orders', 'billing')$$);
SELECT try($$SELECT * FROM changefeed.lease_acquire('public.priv_orders', 'billing', 'p2', '1 minute')$$);
-- The steps a running processor calls, even under the owner's instance name.
SELECT try($$SELECT * FROM changefeed.lease_balance('public.priv_orders', 'billing', 'p1', '1 minute')$$);
SELECT try($$SELECT * FROM changefeed.lease_keep('public.priv_orders', 'billing', 'p1', '1 minute', 0)$$);
SELECT try($$SELECT changefeed.lease_steal('public.priv_orders', 'billing', 0, 'p2', 'p1', '1 minute')$$);
SELECT try($$SELECT changefeed.lease_checkpoint('public.priv_orders', 'billing', 0, 'p1', 1, changefeed.current_position())$$);
SELECT try($$SELECT changefeed.lease_release('public.priv_orders', 'billing', 'p1')$$);
SELECT try($$SELECT changefeed.reset_checkpoint('public.priv_orders', 'billing')$$);
SELECT try($$SELECT changefeed.drop_processor('public.priv_orders', 'billing')$$);
SELECT try($$SELECT * FROM changefeed.lag('public.priv_orders', 'billing')$$);
SELECT count(*) AS visible_leases FROM changefeed.leases;
SELECT changefeed.lease_init('public.priv_orders', 'audit');              -- a name of its own is fine
RESET ROLE;
SET ROLE regress_cf_reader;
SELECT try($$SELECT * FROM changefeed.lag('public.priv_orders', 'billing')$$);
SELECT try($$SELECT * FROM changefeed.lease_keep('public.priv_orders', 'billing', 'p1', '1 minute')$$);
RESET ROLE;
-- Nothing moved: the owner still has all 41 changes pending.
SET ROLE regress_cf_proc1;
SELECT sum(pending) AS pending FROM changefeed.lag('public.priv_orders', 'billing');
RESET ROLE;
SET ROLE regress_cf_admin;
SELECT sum(pending) AS admin_sees_pending FROM changefeed.lag('public.priv_orders', 'billing');
SELECT count(DISTINCT processor) AS admin_sees_processors FROM changefeed.leases
 WHERE table_name = 'public.priv_orders'::regclass;
RESET ROLE;
-- The owner moves its own checkpoint with a function, never an UPDATE; the
-- moved leases are freed with a new epoch, so a running instance is fenced.
SET ROLE regress_cf_proc1;
SELECT changefeed.reset_checkpoint('public.priv_orders', 'billing') AS moved;
SELECT sum(pending) AS pending_after_reset FROM changefeed.lag('public.priv_orders', 'billing');
SELECT try($$SELECT changefeed.lease_checkpoint('public.priv_orders', 'billing', 0, 'p1', 1, changefeed.current_position())$$);
RESET ROLE;

-- Tenants: a role bound to one tenant reads only that tenant's changes.
SET ROLE regress_cf_proc1;
SELECT try($$SELECT changefeed.bind_tenant('regress_cf_tenant_a', 'a')$$);   -- admins only
RESET ROLE;
SET ROLE regress_cf_admin;
SELECT changefeed.bind_tenant('regress_cf_tenant_a', 'a');
SELECT * FROM changefeed.tenant_bindings;
RESET ROLE;
SET ROLE regress_cf_tenant_a;
SELECT tenant, count(*) FROM changefeed.read('public.priv_orders', (SELECT p FROM pos)) GROUP BY 1 ORDER BY 1;
SELECT tenant, count(*) FROM changefeed.read('public.priv_orders', (SELECT p FROM pos), tenant => 'a') GROUP BY 1;
SELECT try($$SELECT count(*) FROM changefeed.read('public.priv_orders', (SELECT p FROM pos), tenant => 'b')$$);
RESET ROLE;
-- read(tenant => ...) narrows any reader's feed; on a table without a tenant
-- column it is an error, not an empty feed.
SELECT try($$SELECT count(*) FROM changefeed.read('public.priv_notes', (SELECT p FROM pos), tenant => 'a')$$);
SET ROLE regress_cf_reader;
SELECT tenant, count(*) FROM changefeed.read('public.priv_orders', (SELECT p FROM pos), tenant => 'b') GROUP BY 1;
RESET ROLE;
GRANT SELECT ON public.priv_notes TO regress_cf_tenant_a;
SET ROLE regress_cf_tenant_a;
SELECT try($$SELECT count(*) FROM changefeed.read('public.priv_notes', (SELECT p FROM pos))$$);
RESET ROLE;
SELECT changefeed.unbind_tenant('regress_cf_tenant_a');

-- MERGE is captured like the writes it makes.
CREATE TEMP TABLE pos2 AS SELECT changefeed.current_position() AS p;
GRANT SELECT ON pos2 TO PUBLIC;
SET ROLE regress_cf_owner;
MERGE INTO public.priv_notes n
USING (VALUES (1, 'one'), (2, 'two')) AS v(id, body) ON n.id = v.id
WHEN MATCHED THEN UPDATE SET body = v.body
WHEN NOT MATCHED THEN INSERT VALUES (v.id, v.body);
MERGE INTO public.priv_notes n
USING (VALUES (1, 'uno'), (2, NULL)) AS v(id, body) ON n.id = v.id
WHEN MATCHED AND v.body IS NULL THEN DELETE
WHEN MATCHED THEN UPDATE SET body = v.body;
SELECT doc_id, operation, current->>'body' AS body FROM changefeed.read('public.priv_notes', (SELECT p FROM pos2));
RESET ROLE;

-- Drops work for everyone: a non-superuser drops its temporary, priv_plain and
-- enabled tables, its schema and everything it owns.
SET ROLE regress_cf_owner;
CREATE TEMP TABLE scratch (id int);
DROP TABLE scratch;
CREATE TABLE public.priv_plain (id int);
DROP TABLE public.priv_plain;
CREATE SCHEMA regress_cf_owned;
CREATE TABLE regress_cf_owned.inner_t (id int PRIMARY KEY);
SELECT changefeed.enable('regress_cf_owned.inner_t') > 0 AS enabled;
DROP SCHEMA regress_cf_owned CASCADE;
RESET ROLE;
SELECT count(*) AS collections_left FROM changefeed.collection
 WHERE relid::text ~ '(^|[.])priv_|regress_cf_owned';   -- priv_orders, priv_notes, priv_secrets
SET ROLE regress_cf_owner;
-- A materialized view refreshed concurrently drops a temporary diff table as its owner.
CREATE MATERIALIZED VIEW public.priv_order_totals AS SELECT tenant, sum(amount) AS total FROM public.priv_orders GROUP BY tenant;
CREATE UNIQUE INDEX ON public.priv_order_totals (tenant);
RESET ROLE;
REFRESH MATERIALIZED VIEW CONCURRENTLY public.priv_order_totals;
SET ROLE regress_cf_owner;
REFRESH MATERIALIZED VIEW CONCURRENTLY public.priv_order_totals;
DROP TABLE public.priv_orders CASCADE;
RESET ROLE;
SELECT relid FROM changefeed.collection WHERE relid::text LIKE 'priv\_%' ORDER BY 1;

SET client_min_messages = warning;
DO $$ BEGIN EXECUTE format('REVOKE CREATE ON DATABASE %I FROM regress_cf_owner', current_database()); END $$;
DROP OWNED BY regress_cf_owner, regress_cf_other_owner, regress_cf_reader, regress_cf_proc1,
              regress_cf_proc2, regress_cf_admin, regress_cf_nobody, regress_cf_tenant_a;
DROP ROLE regress_cf_owner, regress_cf_other_owner, regress_cf_reader, regress_cf_proc1,
          regress_cf_proc2, regress_cf_admin, regress_cf_nobody, regress_cf_tenant_a;
RESET client_min_messages;
SELECT count(*) AS collections_left FROM changefeed.collection WHERE relid::text LIKE 'priv\_%';
SELECT count(*) AS processors_left FROM changefeed.processor p
 WHERE NOT EXISTS (SELECT 1 FROM changefeed.collection c WHERE c.id = p.collection_id);

