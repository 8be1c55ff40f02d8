-- Moving, resyncing and forgetting a processor from outside its instances
-- (what the changefeed command-line tool calls): only the processor's owning
-- role or an admin may; each moved lease is freed with a new epoch, so a
-- running instance is fenced; range ids and lost history are refused.
CREATE ROLE regress_cfa_owner LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_cfa_other LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_cfa_admin LOGIN IN ROLE changefeed_admin;
CREATE ROLE regress_cfa_reader LOGIN IN ROLE changefeed_reader;
CREATE TABLE public.adm_items (id int PRIMARY KEY, v text);
SELECT changefeed.enable('public.adm_items', ranges => 4) > 0 AS enabled;
GRANT SELECT ON public.adm_items TO regress_cfa_owner, regress_cfa_other, regress_cfa_reader;
INSERT INTO public.adm_items SELECT g, 'v' FROM generate_series(1, 20) g;

-- Entry points for processors, implementations for nobody.
SELECT has_function_privilege('regress_cfa_owner', 'changefeed.resync_processor(regclass,text,int[])', 'EXECUTE') AS owner_may,
       has_function_privilege('regress_cfa_reader', 'changefeed.resync_processor(regclass,text,int[])', 'EXECUTE') AS reader_may,
       has_function_privilege('regress_cfa_owner', 'changefeed._resync_processor(regclass,text,int[])', 'EXECUTE') AS impl_callable,
       has_function_privilege('regress_cfa_owner', 'changefeed.check_range_ids(changefeed.collection,int[])', 'EXECUTE') AS helper_callable;

SET ROLE regress_cfa_owner;
SELECT changefeed.lease_init('public.adm_items', 'view');
SELECT count(*) AS taken FROM changefeed.lease_acquire('public.adm_items', 'view', 'i1', '1 minute');
RESET ROLE;

-- Others may not, whatever they pass.
SET ROLE regress_cfa_other;
SELECT try($$SELECT changefeed.resync_processor('public.adm_items', 'view')$$);
SELECT try($$SELECT changefeed.resync_processor('public.adm_items', 'view', '{0}')$$);
SELECT try($$SELECT changefeed.reset_checkpoint('public.adm_items', 'view', NULL, '{0}')$$);
RESET ROLE;
SET ROLE regress_cfa_reader;
SELECT try($$SELECT changefeed.resync_processor('public.adm_items', 'view')$$);
SELECT try($$SELECT changefeed._resync_processor('public.adm_items', 'view', NULL)$$);
RESET ROLE;
SELECT range_id, owner, epoch, backfill_done FROM changefeed.leases
 WHERE table_name = 'public.adm_items'::regclass ORDER BY range_id;

-- The owner restarts range 0 as a backfill: freed, new epoch, scan from the start.
SET ROLE regress_cfa_owner;
SELECT changefeed.resync_processor('public.adm_items', 'view', '{0}') AS resynced;
SELECT range_id, owner, epoch, backfill_done, backfill_rows FROM changefeed.leases
 WHERE table_name = 'public.adm_items'::regclass ORDER BY range_id;
-- The instance that held it is fenced; the others' leases are untouched.
SELECT try($$SELECT changefeed.lease_checkpoint('public.adm_items', 'view', 0, 'i1', 1, changefeed.current_position())$$);
SELECT try($$SELECT changefeed.lease_checkpoint('public.adm_items', 'view', 1, 'i1', 1, changefeed.current_position())$$);
-- Bad range ids and unknown processors.
SELECT try($$SELECT changefeed.resync_processor('public.adm_items', 'view', '{4}')$$);
SELECT try($$SELECT changefeed.resync_processor('public.adm_items', 'view', '{-1}')$$);
SELECT try($$SELECT changefeed.resync_processor('public.adm_items', 'view', '{}')$$);
SELECT try($$SELECT changefeed.resync_processor('public.adm_items', 'view', '{1,NULL}')$$);
SELECT try($$SELECT changefeed.reset_checkpoint('public.adm_items', 'view', NULL, '{9}')$$);
SELECT try($$SELECT changefeed.resync_processor('public.adm_items', 'never_ran')$$);
SELECT try($$SELECT changefeed.resync_processor('public.adm_items', '')$$);
-- A moved checkpoint ends the backfill of the ranges it moves.
SELECT changefeed.reset_checkpoint('public.adm_items', 'view', NULL, '{0}') AS moved;
SELECT range_id, owner, epoch, backfill_done FROM changefeed.leases
 WHERE table_name = 'public.adm_items'::regclass AND range_id = 0;
RESET ROLE;

-- A position whose history retention dropped is refused, before any lease moves.
CREATE TABLE adm_pos AS SELECT changefeed.current_position() AS pos;
INSERT INTO public.adm_items VALUES (100, 'late');
INSERT INTO changefeed.horizon (collection_id, dropped_txid, dropped_before)
SELECT (changefeed.collection_of('public.adm_items')).id, pg_current_xact_id(), now();
GRANT SELECT ON adm_pos TO regress_cfa_owner;
SET ROLE regress_cfa_owner;
SELECT try(format('SELECT changefeed.reset_checkpoint(%L, %L, %L)', 'public.adm_items', 'view', (SELECT pos FROM adm_pos)));
SELECT sum(epoch) AS epochs_unchanged FROM changefeed.leases WHERE table_name = 'public.adm_items'::regclass;
RESET ROLE;
DELETE FROM changefeed.horizon WHERE collection_id = (changefeed.collection_of('public.adm_items')).id;

-- An admin may resync any processor.
SET ROLE regress_cfa_admin;
SELECT changefeed.resync_processor('public.adm_items', 'view') AS admin_resynced;
RESET ROLE;

SELECT changefeed.disable('public.adm_items');
DROP TABLE public.adm_items, adm_pos;
DROP ROLE regress_cfa_owner, regress_cfa_other, regress_cfa_admin, regress_cfa_reader;
