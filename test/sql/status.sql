-- changefeed.processor_status: one row per collection, processor and range,
-- seen only by who may see it (checked as non-superuser roles).
\set SHOW_CONTEXT never
CREATE ROLE regress_st_app LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_st_billing LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_st_other LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_st_blind LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_st_admin LOGIN IN ROLE changefeed_admin;
CREATE ROLE regress_st_monitor LOGIN IN ROLE changefeed_reader, pg_monitor;
CREATE ROLE regress_st_tenant_a LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_st_nobody LOGIN;
SELECT changefeed.bind_tenant('regress_st_tenant_a', 'a');
GRANT CREATE ON SCHEMA public TO regress_st_app;

SET ROLE regress_st_app;
CREATE TABLE st_orders (id int PRIMARY KEY, total int);
SELECT changefeed.enable('st_orders', ranges => 2) IS NOT NULL AS enabled;
CREATE TABLE st_shared (id int PRIMARY KEY, tenant text NOT NULL);
SELECT changefeed.enable('st_shared', ranges => 1, tenant_column => 'tenant') IS NOT NULL AS enabled;
GRANT SELECT ON st_orders TO regress_st_billing, regress_st_other;
GRANT SELECT ON st_shared TO regress_st_tenant_a, regress_st_billing;
RESET ROLE;

-- billing runs a processor on st_orders and holds both ranges; blind ran one
-- before its SELECT was revoked; tenant_a runs one on st_shared.
SET ROLE regress_st_billing;
SELECT changefeed.lease_init('st_orders', 'billing');
SELECT count(*) FROM changefeed.lease_acquire('st_orders', 'billing', 'pod-1', '1 minute');
SELECT changefeed.lease_init('st_shared', 'audit');
RESET ROLE;
GRANT SELECT ON st_orders TO regress_st_blind;
SET ROLE regress_st_blind;
SELECT changefeed.lease_init('st_orders', 'blind');
RESET ROLE;
REVOKE SELECT ON st_orders FROM regress_st_blind;
SET ROLE regress_st_tenant_a;
SELECT changefeed.lease_init('st_shared', 'a/audit');
RESET ROLE;

-- Nothing written yet: nothing pending, no lag.
SET ROLE regress_st_billing;
SELECT table_name, processor, range_id, owner_role, instance, live, epoch, backfill_done,
       pending_estimate, pending_exact, lag_seconds, history_lost, checkpoint_age < interval '1 hour' AS recent
  FROM changefeed.processor_status WHERE table_name = 'st_orders'::regclass ORDER BY processor, range_id;
RESET ROLE;

INSERT INTO st_orders SELECT g, g FROM generate_series(1, 9) g;
INSERT INTO st_shared VALUES (1, 'a'), (2, 'b'), (3, 'b'), (4, 'a'), (5, 'b');
SELECT pg_sleep(0.01);

-- The owner sees its processor's ranges with the changes waiting: the
-- estimate agrees with lag()'s exact count, and the lag is the age of the oldest.
SET ROLE regress_st_billing;
SELECT s.range_id, s.pending_estimate, s.pending_exact, l.pending AS lag_pending,
       s.lag_seconds > 0 AS behind, s.history_lost
  FROM changefeed.processor_status s
  JOIN changefeed.lag('st_orders', 'billing') l USING (range_id)
 WHERE s.table_name = 'st_orders'::regclass AND s.processor = 'billing' ORDER BY 1;
SELECT sum(pending_estimate) AS total FROM changefeed.processor_status
 WHERE table_name = 'st_orders'::regclass AND processor = 'billing';
-- st_shared: billing owns "audit" and may read every tenant.
SELECT processor, pending_estimate FROM changefeed.processor_status WHERE table_name = 'st_shared'::regclass;
RESET ROLE;

-- A checkpoint at the end of range 0 leaves nothing pending there; a
-- position in the middle of a window counts only what comes after it.
SET ROLE regress_st_billing;
SELECT changefeed.lease_checkpoint('st_orders', 'billing', 0, 'pod-1', 1,
       (SELECT "position" FROM changefeed.read('st_orders', (SELECT checkpoint FROM changefeed.leases
                                                             WHERE processor = 'billing' AND range_id = 0), 100, '{0}')
         ORDER BY seq DESC LIMIT 1));
SELECT changefeed.lease_checkpoint('st_orders', 'billing', 1, 'pod-1', 1,
       (SELECT "position" FROM changefeed.read('st_orders', (SELECT checkpoint FROM changefeed.leases
                                                             WHERE processor = 'billing' AND range_id = 1), 1, '{1}')));
SELECT s.range_id, s.pending_estimate, l.pending AS lag_pending, s.lag_seconds = 0 AS caught_up
  FROM changefeed.processor_status s
  JOIN changefeed.lag('st_orders', 'billing') l USING (range_id)
 WHERE s.table_name = 'st_orders'::regclass AND s.processor = 'billing' ORDER BY 1;
RESET ROLE;

-- Another processor role sees none of billing's rows; its own processor on
-- st_orders does not exist, so nothing at all.
SET ROLE regress_st_other;
SELECT count(*) AS other_sees FROM changefeed.processor_status;
RESET ROLE;
-- A role that owns a processor but may no longer read the table sees its
-- rows, without the estimate (it counts the feed's changes).
SET ROLE regress_st_blind;
SELECT processor, range_id, pending_estimate, lag_seconds, history_lost FROM changefeed.processor_status ORDER BY 1, 2;
RESET ROLE;
-- Bound to tenant a: its own processor, counting tenant a's changes only.
SET ROLE regress_st_tenant_a;
SELECT table_name, processor, pending_estimate FROM changefeed.processor_status ORDER BY 1, 2;
RESET ROLE;
-- The tables' owner sees every processor on its own tables (and no other
-- table's), with estimates, and the lag of each; it may watch them, not move
-- them (reset_checkpoint stays with the processor's role and the admins).
SET ROLE regress_st_app;
SELECT table_name, processor, count(*) AS ranges, sum(pending_estimate) AS pending
  FROM changefeed.processor_status GROUP BY 1, 2 ORDER BY 1, 2;
SELECT range_id, pending, history_lost FROM changefeed.lag('st_orders', 'billing') ORDER BY 1;
SELECT count(*) FROM changefeed.lag('st_orders', 'never_ran');
SELECT changefeed.reset_checkpoint('st_orders', 'billing');
RESET ROLE;
-- Admins and pg_monitor members see every processor, with estimates.
SET ROLE regress_st_admin;
SELECT table_name, processor, count(*) AS ranges, sum(pending_estimate) AS pending
  FROM changefeed.processor_status WHERE table_name IN ('st_orders'::regclass, 'st_shared'::regclass)
 GROUP BY 1, 2 ORDER BY 1, 2;
RESET ROLE;
SET ROLE regress_st_monitor;
SELECT table_name, processor, count(*) AS ranges, sum(pending_estimate) AS pending
  FROM changefeed.processor_status WHERE table_name IN ('st_orders'::regclass, 'st_shared'::regclass)
 GROUP BY 1, 2 ORDER BY 1, 2;
RESET ROLE;

-- Ways around it: a role outside changefeed_reader cannot reach the view or
-- the function; nobody calls the implementation or reads the lease table.
SET ROLE regress_st_nobody;
SELECT try('SELECT count(*) FROM changefeed.processor_status');
RESET ROLE;
SET ROLE regress_st_other;
SELECT try('SELECT count(*) FROM changefeed._processor_status_rows()');
SELECT try('SELECT count(*) FROM changefeed.lease');
-- The entry point checks the caller, not the view's owner: called directly it
-- shows the same (nothing).
SELECT count(*) AS direct FROM changefeed.processor_status_rows();
-- Joining the role that owns the processor is what it takes.
RESET ROLE;
GRANT regress_st_billing TO regress_st_other;
SET ROLE regress_st_other;
SELECT count(*) AS after_grant FROM changefeed.processor_status WHERE processor = 'billing';
RESET ROLE;
REVOKE regress_st_billing FROM regress_st_other;

-- A damaged checkpoint (a restore would leave a foreign one) shows as lost
-- history instead of failing the whole view.
UPDATE changefeed.lease SET checkpoint = 'garbage' WHERE processor = 'blind' AND range_id = 0;
SELECT processor, range_id, pending_estimate, history_lost FROM changefeed.processor_status
 WHERE table_name = 'st_orders'::regclass AND processor = 'blind' ORDER BY 2;

-- The count stops at 1000: beyond it the estimate says it is a lower bound.
CREATE TABLE st_busy (id int PRIMARY KEY);
SELECT changefeed.enable('st_busy', ranges => 1) IS NOT NULL AS enabled;
SELECT changefeed.lease_init('st_busy', 'slow');
INSERT INTO st_busy SELECT generate_series(1, 1005);
SELECT processor, pending_estimate, pending_exact, lag_seconds >= 0 AS lag_known
  FROM changefeed.processor_status WHERE table_name = 'st_busy'::regclass;

DROP TABLE st_orders, st_shared, st_busy;
SELECT changefeed.unbind_tenant('regress_st_tenant_a');
REVOKE CREATE ON SCHEMA public FROM regress_st_app;
DROP ROLE regress_st_app, regress_st_billing, regress_st_other, regress_st_blind, regress_st_admin,
          regress_st_monitor, regress_st_tenant_a, regress_st_nobody;
