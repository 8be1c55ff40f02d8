-- Processor names are capped per role and table: a role that may read a
-- table cannot claim names without end (CF018 past
-- changefeed.max_processors_per_role), and processor_status counts the lag
-- of a bounded number of ranges per owning role, so many names of one role
-- do not make the view slow for everyone.  Roles:
--   regress_pn_app    owns the table (changefeed_reader)
--   regress_pn_svc    the real service (changefeed_processor, SELECT)
--   regress_pn_squat  another processor role with SELECT
--   regress_pn_adm    changefeed_admin, no privilege on the table
SET client_min_messages = warning;
CREATE ROLE regress_pn_app LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_pn_svc LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_pn_squat LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_pn_adm LOGIN IN ROLE changefeed_admin;
GRANT CREATE ON SCHEMA public TO regress_pn_app;
RESET client_min_messages;

SET ROLE regress_pn_app;
CREATE TABLE public.pn_orders (id int PRIMARY KEY);
SELECT changefeed.enable('public.pn_orders') > 0 AS enabled;
GRANT SELECT ON public.pn_orders TO regress_pn_svc, regress_pn_squat;
RESET ROLE;

-- The cap is the server administrator's: a processor role cannot raise it.
SET ROLE regress_pn_squat;
SELECT try($$SET changefeed.max_processors_per_role = 1000$$);
RESET ROLE;

SET changefeed.max_processors_per_role = 3;
SET ROLE regress_pn_squat;
SELECT count(changefeed.lease_init('public.pn_orders', 'n' || g)) AS claimed FROM generate_series(1, 3) g;
-- A fourth new name is refused, with what to do about it.
\set SHOW_CONTEXT never
SELECT changefeed.lease_init('public.pn_orders', 'n4');
-- Names it holds start again as before.
SELECT changefeed.lease_init('public.pn_orders', 'n1') AS restarted;
-- Another role's names are its own count.
SET ROLE regress_pn_svc;
SELECT changefeed.lease_init('public.pn_orders', 'billing') AS started;
-- Dropping a name frees its place.
SET ROLE regress_pn_squat;
SELECT changefeed.drop_processor('public.pn_orders', 'n3') AS dropped;
SELECT changefeed.lease_init('public.pn_orders', 'n4') AS started;
-- A name an admin reserves for a role is never refused, and counts.
SET ROLE regress_pn_adm;
SELECT changefeed.reserve_processor('public.pn_orders', 'reports', 'regress_pn_squat') AS reserved;
SET ROLE regress_pn_squat;
SELECT try($$SELECT changefeed.lease_init('public.pn_orders', 'n5')$$);
RESET ROLE;
SELECT count(*) AS squat_names FROM changefeed.processor WHERE owner_role = 'regress_pn_squat'::regrole;

-- processor_status: the lag of at most 1024 ranges per owning role and table
-- is counted; a role with more (here 65 processors of 16 ranges) gets no
-- estimate for the rest, and other owners' processors still get theirs.
SET changefeed.max_processors_per_role = 100;
SET ROLE regress_pn_squat;
SELECT count(changefeed.lease_init('public.pn_orders', 'm' || g)) AS claimed FROM generate_series(1, 62) g;
RESET ROLE;
INSERT INTO public.pn_orders SELECT g FROM generate_series(1, 20) g;
SELECT owner_role, count(*) AS ranges, count(pending_estimate) AS estimated
  FROM changefeed.processor_status WHERE table_name = 'public.pn_orders'::regclass
 GROUP BY owner_role ORDER BY owner_role::text;
SELECT sum(pending_estimate) AS billing_pending
  FROM changefeed.processor_status WHERE processor = 'billing';
RESET changefeed.max_processors_per_role;

SELECT changefeed.disable('public.pn_orders', forget => true);
DROP TABLE public.pn_orders;
SET client_min_messages = warning;
REVOKE CREATE ON SCHEMA public FROM regress_pn_app;
DROP ROLE regress_pn_app, regress_pn_svc, regress_pn_squat, regress_pn_adm;
RESET client_min_messages;
