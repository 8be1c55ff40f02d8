-- Trust between non-superuser roles of one database: what an admin, a
-- stranger processor and a table owner cannot do to one another through the
-- extension.  Roles (cluster-wide, dropped at the end):
--   regress_ta_app  owns the tables (changefeed_reader)
--   regress_ta_svc  the real service (changefeed_processor, SELECT on app's tables)
--   regress_ta_att  another processor role, without SELECT on app's tables
--   regress_ta_sq   another processor role, with SELECT (a squatter that may read)
--   regress_ta_adm  changefeed_admin, no privilege on app's tables
SET client_min_messages = warning;
CREATE ROLE regress_ta_app LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_ta_svc LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_ta_att LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_ta_sq LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_ta_adm LOGIN IN ROLE changefeed_admin;
GRANT CREATE ON SCHEMA public TO regress_ta_app;
RESET client_min_messages;

SET ROLE regress_ta_app;
CREATE TABLE public.ta_orders (id int PRIMARY KEY, amount int);
CREATE TABLE public.ta_vault (id int PRIMARY KEY, secret text, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE public.ta_vault2 (id int PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now());
SELECT changefeed.enable('public.ta_orders') > 0 AS enabled;
SELECT changefeed.enable('public.ta_vault') > 0 AS enabled;
GRANT SELECT ON public.ta_orders, public.ta_vault TO regress_ta_svc, regress_ta_sq;
INSERT INTO public.ta_vault SELECT g, 's' || g, now() - interval '1 day' FROM generate_series(1, 5) g;
RESET ROLE;

-- Hole 4: an admin cannot make the extension delete rows it could not delete
-- itself.  Setting a TTL column needs the owner or DELETE on the table.
SET ROLE regress_ta_adm;
SELECT try($$DELETE FROM public.ta_vault$$);
SELECT try($$SELECT changefeed.alter('public.ta_vault', ttl_column => 'created_at')$$);
SELECT try($$SELECT changefeed.enable('public.ta_vault2', ttl_column => 'created_at')$$);
-- Retention and previous images are the extension's own data: still an admin's.
SELECT try($$SELECT changefeed.alter('public.ta_vault', retention => '3 days')$$);
SELECT ARRAY(SELECT s FROM unnest(failed_steps) s WHERE s LIKE '%ta\_%') AS failed_steps
  FROM changefeed.maintain();
RESET ROLE;
SELECT ttl_column FROM changefeed.collections WHERE table_name = 'public.ta_vault'::regclass;
SELECT count(*) AS vault_rows FROM public.ta_vault;
-- The owner may; so may a role with DELETE on the table.
SET ROLE regress_ta_app;
SELECT try($$SELECT changefeed.alter('public.ta_vault', ttl_column => 'created_at')$$);
GRANT DELETE ON public.ta_vault2 TO regress_ta_adm;
RESET ROLE;
SET ROLE regress_ta_adm;
SELECT try($$SELECT changefeed.enable('public.ta_vault2', ttl_column => 'created_at')$$);
-- Maintenance "as of later" expires rows early: not for tables the admin may
-- not delete from (that step fails, the others go on).
SET ROLE regress_ta_app;
INSERT INTO public.ta_vault SELECT g, 'later', now() + interval '1 hour' FROM generate_series(10, 12) g;
RESET ROLE;
DELETE FROM public.ta_vault WHERE secret <> 'later';
-- (Only this test's tables are shown: other tests leave TTL tables behind.)
SET ROLE regress_ta_adm;
SET client_min_messages = error;
SELECT ARRAY(SELECT s FROM unnest(failed_steps) s WHERE s LIKE '%ta\_%') AS failed_steps
  FROM changefeed.maintain(now() + interval '2 hours');
RESET client_min_messages;
RESET ROLE;
SELECT count(*) AS vault_rows_kept FROM public.ta_vault;

-- Hole 5: nothing is filed under a processor name before its role claimed
-- it with lease_init(), which needs SELECT.  att cannot pre-fill the
-- deduplication store of `projector`.
SET ROLE regress_ta_att;
SELECT try($$SELECT changefeed.dedup_record('public.ta_orders', 'projector',
                                            ARRAY(SELECT 'predicted-' || g FROM generate_series(1, 96000) g))$$);
SELECT try($$SELECT changefeed.dedup_applied('public.ta_orders', 'projector', ARRAY['predicted-1'])$$);
SELECT try($$SELECT changefeed.lease_init('public.ta_orders', 'projector')$$);
RESET ROLE;
SET ROLE regress_ta_svc;
SELECT changefeed.lease_init('public.ta_orders', 'projector') AS leases;
SELECT count(*) AS poisoned FROM changefeed.dedup_applied('public.ta_orders', 'projector', ARRAY['predicted-1', 'predicted-96000']);
RESET ROLE;
-- Once claimed, it is svc's: att still cannot write into it.
SET ROLE regress_ta_att;
SELECT try($$SELECT changefeed.dedup_record('public.ta_orders', 'projector', ARRAY['predicted-2'])$$);
RESET ROLE;
-- The per-call cap has a code of its own.
SET ROLE regress_ta_svc;
SELECT try($$SELECT changefeed.dedup_record('public.ta_orders', 'projector',
                                            ARRAY(SELECT 'e' || g FROM generate_series(1, 100001) g))$$);
RESET ROLE;

-- Hole 6: phantom instances under an unclaimed name are refused; svc's one
-- instance then gets every range.
SET ROLE regress_ta_att;
SELECT try(format($$SELECT changefeed.instance_register('public.ta_orders', 'billing', 'phantom-%s', 't')$$, g))
  FROM generate_series(1, 2) g;
RESET ROLE;
SET ROLE regress_ta_svc;
SELECT changefeed.lease_init('public.ta_orders', 'billing') AS leases;
SELECT changefeed.instance_register('public.ta_orders', 'billing', 'svc-1', 'tok');
SELECT count(*) AS ranges_held FROM changefeed.lease_acquire('public.ta_orders', 'billing', 'svc-1', '1 minute');
SELECT count(*) AS ranges_held FROM changefeed.lease_acquire('public.ta_orders', 'billing', 'svc-1', '1 minute');
RESET ROLE;
SET ROLE regress_ta_att;
SELECT try($$SELECT changefeed.instance_register('public.ta_orders', 'billing', 'phantom-3', 't')$$);
RESET ROLE;
-- A processor's own role is capped at 1000 live instances (CF018).
SET ROLE regress_ta_svc;
DO $$
BEGIN
    FOR g IN 1 .. 1001 LOOP
        PERFORM changefeed.instance_register('public.ta_orders', 'billing', 'many-' || g, 'tok');
    END LOOP;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END
$$;
-- A role that lost SELECT may still give its leases up, but takes no more.
RESET ROLE;
REVOKE SELECT ON public.ta_orders FROM regress_ta_svc;
SET ROLE regress_ta_svc;
SELECT try($$SELECT changefeed.lease_acquire('public.ta_orders', 'billing', 'svc-1', '1 minute')$$);
SELECT changefeed.lease_release('public.ta_orders', 'billing', 'svc-1') AS released;
SELECT changefeed.instance_unregister('public.ta_orders', 'billing', 'svc-1', 'tok') AS unregistered;
RESET ROLE;
GRANT SELECT ON public.ta_orders TO regress_ta_svc;

-- The squat: a role that may read claims a name first.  Loud (svc's start
-- fails with 42501), and it gains nothing: an admin gives the name to svc,
-- which drops what the squatter filed under it.
SET ROLE regress_ta_sq;
SELECT changefeed.lease_init('public.ta_orders', 'reports') AS leases;
SELECT changefeed.instance_register('public.ta_orders', 'reports', 'sq-1', 't');
SELECT count(*) FROM changefeed.lease_acquire('public.ta_orders', 'reports', 'sq-1', '1 minute');
RESET ROLE;
SET ROLE regress_ta_svc;
SELECT try($$SELECT changefeed.lease_init('public.ta_orders', 'reports')$$);
RESET ROLE;
SET ROLE regress_ta_sq;
SELECT try($$SELECT changefeed.reserve_processor('public.ta_orders', 'reports', 'regress_ta_sq')$$);
RESET ROLE;
SET ROLE regress_ta_adm;
SELECT changefeed.reserve_processor('public.ta_orders', 'reports', 'regress_ta_svc') AS changed_hands;
SELECT changefeed.reserve_processor('public.ta_orders', 'reports', 'regress_ta_svc') AS changed_hands;
RESET ROLE;
SET ROLE regress_ta_sq;
SELECT try($$SELECT changefeed.lease_checkpoint('public.ta_orders', 'reports', 0, 'sq-1', 1, changefeed.current_position())$$);
RESET ROLE;
SET ROLE regress_ta_svc;
SELECT changefeed.lease_init('public.ta_orders', 'reports') AS leases;
SELECT changefeed.instance_register('public.ta_orders', 'reports', 'svc-1', 'tok');
SELECT count(*) AS ranges_held FROM changefeed.lease_acquire('public.ta_orders', 'reports', 'svc-1', '1 minute');
RESET ROLE;
-- A name reserved before the first start cannot be squatted at all.
SET ROLE regress_ta_adm;
SELECT changefeed.reserve_processor('public.ta_orders', 'ledger', 'regress_ta_svc') AS changed_hands;
RESET ROLE;
SET ROLE regress_ta_sq;
SELECT try($$SELECT changefeed.lease_init('public.ta_orders', 'ledger')$$);
RESET ROLE;
SET ROLE regress_ta_svc;
SELECT changefeed.lease_init('public.ta_orders', 'ledger') AS leases;
RESET ROLE;

-- Holes 7 and 8: retention is bounded by changefeed.max_retention (365 days
-- by default); what would overflow is refused with CF003, and maintenance
-- keeps working.
SHOW changefeed.max_retention;
SET ROLE regress_ta_app;
CREATE TABLE public.ta_hog (id int PRIMARY KEY);
SELECT try($$SELECT changefeed.enable('public.ta_hog', retention => '1000 years')$$);
SELECT try($$SELECT changefeed.enable('public.ta_hog', retention => '100000000 years')$$);
SELECT try($$SELECT changefeed.enable('public.ta_hog', retention => '366 days')$$);
SELECT changefeed.enable('public.ta_hog', retention => '30 days') > 0 AS enabled;
SELECT try($$SELECT changefeed.alter('public.ta_hog', retention => '100000000 years')$$);
RESET ROLE;
SELECT ARRAY(SELECT s FROM unnest(failed_steps) s WHERE s LIKE '%ta\_%') AS failed_steps
  FROM changefeed.maintain();
-- A retention stored before the bound existed is cut to it: maintenance
-- still runs, its TTL deletes kept.
UPDATE changefeed.collection SET retention = '100000000 years' WHERE relid = 'public.ta_hog'::regclass;
INSERT INTO public.ta_vault VALUES (30, 'old', now() - interval '1 day');
SELECT failed_steps = '{}' AS no_failed_step, partitions_dropped FROM changefeed.maintain();
SELECT count(*) AS vault_old_rows FROM public.ta_vault WHERE id = 30;
UPDATE changefeed.collection SET retention = '30 days' WHERE relid = 'public.ta_hog'::regclass;

-- Hole 7: a collection's changes older than its own retention are cut off
-- even while their partition is kept for ta_hog's 30 days: a position that
-- had not read them reports history lost; ta_hog's own stay readable.
SET ROLE regress_ta_app;
CREATE TABLE public.ta_short (id int PRIMARY KEY);
SELECT changefeed.enable('public.ta_short', retention => '1 day') > 0 AS enabled;
GRANT SELECT ON public.ta_short, public.ta_hog TO regress_ta_svc;
RESET ROLE;
SET ROLE regress_ta_svc;
CREATE TEMP TABLE ta_pos AS SELECT changefeed.current_position() AS p;
RESET ROLE;
INSERT INTO public.ta_short VALUES (1), (2);
INSERT INTO public.ta_hog VALUES (1), (2);
SET ROLE regress_ta_adm;
SET client_min_messages = error;
SELECT ARRAY(SELECT s FROM unnest(failed_steps) s WHERE s LIKE '%ta\_%') AS failed_steps
  FROM changefeed.maintain(now() + interval '2 days');
RESET client_min_messages;
RESET ROLE;
SET ROLE regress_ta_svc;
SELECT try($$SELECT count(*) FROM changefeed.read('public.ta_short', (SELECT p FROM ta_pos))$$);
SELECT count(*) AS hog_changes FROM changefeed.read('public.ta_hog', (SELECT p FROM ta_pos));
RESET ROLE;
SELECT table_name, cause FROM changefeed.horizons WHERE table_name::text LIKE 'ta\_%' ORDER BY 1;

-- Hole 9: a table owner's trigger that sleeps in a TTL delete holds up its
-- own step for changefeed.maintenance_statement_timeout only; the step is
-- reported and retried, the other tables' TTL and the partition steps go on.
SET ROLE regress_ta_app;
CREATE TABLE public.ta_sleepy (id int PRIMARY KEY, expires timestamptz NOT NULL);
CREATE FUNCTION public.ta_sleep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_sleep(30); RETURN OLD; END $$;
CREATE TRIGGER ta_sleep BEFORE DELETE ON public.ta_sleepy FOR EACH ROW EXECUTE FUNCTION public.ta_sleep();
SELECT changefeed.enable('public.ta_sleepy', ttl_column => 'expires') > 0 AS enabled;
INSERT INTO public.ta_sleepy VALUES (1, now() - interval '1 hour');
INSERT INTO public.ta_vault VALUES (20, 'old', now() - interval '1 day');
RESET ROLE;
SET changefeed.maintenance_statement_timeout = '200ms';
SET ROLE regress_ta_svc;
SELECT ARRAY(SELECT s FROM unnest(failed_steps) s WHERE s LIKE '%ta\_%') AS failed_steps
  FROM changefeed.maintain();
RESET ROLE;
RESET changefeed.maintenance_statement_timeout;
SELECT count(*) AS sleepy_rows, (SELECT count(*) FROM public.ta_vault WHERE id = 20) AS vault_old_rows
  FROM public.ta_sleepy;
-- Only a superuser may lift the bound.
SET ROLE regress_ta_app;
SELECT try($$SET changefeed.maintenance_statement_timeout = 0$$);
RESET ROLE;

-- Clean up: roles are cluster-wide.
SET client_min_messages = warning;
DROP TABLE public.ta_orders, public.ta_vault, public.ta_vault2, public.ta_hog, public.ta_short, public.ta_sleepy;
DROP FUNCTION public.ta_sleep();
REVOKE CREATE ON SCHEMA public FROM regress_ta_app;
DROP OWNED BY regress_ta_app, regress_ta_svc, regress_ta_att, regress_ta_sq, regress_ta_adm;
DROP ROLE regress_ta_app, regress_ta_svc, regress_ta_att, regress_ta_sq, regress_ta_adm;
RESET client_min_messages;
