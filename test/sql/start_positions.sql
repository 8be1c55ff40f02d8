-- Start positions: position_at() and lease_init()'s start options, tried as
-- a processor role.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE ROLE regress_start_owner LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_start_proc LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_start_nobody LOGIN IN ROLE changefeed_processor;
GRANT CREATE ON SCHEMA public TO regress_start_owner;
RESET client_min_messages;
SET ROLE regress_start_owner;
CREATE TABLE start_items (id int PRIMARY KEY, v text);
SELECT changefeed.enable('start_items', ranges => 4) > 0 AS enabled;
GRANT SELECT ON start_items TO regress_start_proc;
RESET ROLE;
-- Reads every change from a position, in seq order.
CREATE FUNCTION start_ids(pos text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(doc_id, ',' ORDER BY seq), '') FROM changefeed.read('start_items', pos)
$$;
-- The checkpoints of a processor's leases, read back as the ids they deliver.
CREATE FUNCTION start_delivers(proc text) RETURNS SETOF text LANGUAGE sql AS $$
    SELECT DISTINCT start_ids(l.checkpoint) FROM changefeed.leases l
     WHERE l.table_name = 'start_items'::regclass AND l.processor = proc
$$;

INSERT INTO start_items VALUES (1, 'before');
INSERT INTO start_items VALUES (2, 'before');
SELECT clock_timestamp() AS t \gset
INSERT INTO start_items VALUES (3, 'after');
UPDATE start_items SET v = 'changed after' WHERE id = 1;

SET ROLE regress_start_proc;
-- position_at() delivers exactly what was written at or after the time.
SELECT start_ids(changefeed.position_at('start_items', :'t'));
-- A time before every change delivers them all; one in the future nothing yet.
SELECT start_ids(changefeed.position_at('start_items', now() - interval '1 hour'));
SELECT start_ids(changefeed.position_at('start_items', now() + interval '1 hour'));
SELECT try($$SELECT changefeed.position_at('start_items', NULL)$$);
SELECT try($$SELECT changefeed.position_at('start_items', 'infinity')$$);
SELECT try($$SELECT changefeed.position_at('start_items', '-infinity')$$);

-- lease_init: at most one start option.
SELECT try(format('SELECT changefeed.lease_init(%L, %L, true, %L)', 'start_items', 'p0', :'t'));
SELECT try(format('SELECT changefeed.lease_init(%L, %L, false, %L, changefeed.current_position())', 'start_items', 'p0', :'t'));
SELECT try($$SELECT changefeed.lease_init('start_items', 'p0', true, NULL, changefeed.current_position())$$);
SELECT try($$SELECT changefeed.lease_init('start_items', 'p0', start_at => 'infinity')$$);
SELECT try($$SELECT changefeed.lease_init('start_items', 'p0', start_position => 'not a position')$$);
SELECT try($$SELECT changefeed.lease_init('start_items', 'p0', start_position => '')$$);
SELECT count(*) AS leases_made FROM changefeed.leases WHERE table_name = 'start_items'::regclass;
-- start_at: the leases hold the position of the time.
SELECT changefeed.lease_init('start_items', 'by_time', start_at => :'t');
SELECT start_delivers('by_time');
-- start_position: the leases hold it as given.
SELECT changefeed.lease_init('start_items', 'by_position',
                             start_position => changefeed.position_at('start_items', now() - interval '1 hour'));
SELECT start_delivers('by_position');
-- No option: now.
SELECT changefeed.lease_init('start_items', 'by_default');
SELECT start_delivers('by_default');
-- Existing leases win: the start options are ignored (but still validated).
SELECT changefeed.lease_init('start_items', 'by_default', start_at => now() - interval '1 hour');
SELECT changefeed.lease_init('start_items', 'by_time', true);
SELECT start_delivers('by_default');
SELECT start_delivers('by_time');
SELECT try($$SELECT changefeed.lease_init('start_items', 'by_time', start_position => 'garbage')$$);
SELECT try($$SELECT changefeed.lease_init('start_items', 'by_time', true, now())$$);
RESET ROLE;

-- A role without SELECT on the table may not ask.
SET ROLE regress_start_nobody;
SELECT try($$SELECT changefeed.position_at('start_items', now())$$);
SELECT try($$SELECT changefeed.lease_init('start_items', 'intruder', start_at => now())$$);
RESET ROLE;

SELECT changefeed.position_at('start_items', :'t') AS old_position \gset
-- Retention dropped what was written before a time (faked: the horizon of a
-- dropped partition): earlier start times lost history, later ones do not.
INSERT INTO changefeed.horizon (collection_id, dropped_txid, dropped_before)
SELECT id, pg_current_xact_id(), now() FROM changefeed.collections WHERE table_name = 'start_items'::regclass;
SET ROLE regress_start_proc;
SELECT try($$SELECT changefeed.position_at('start_items', now() - interval '1 day')$$);
SELECT try($$SELECT changefeed.lease_init('start_items', 'too_early', start_at => now() - interval '1 day')$$);
SELECT try(format('SELECT changefeed.lease_init(%L, %L, start_position => %L)', 'start_items', 'too_early',
                  :'old_position'));
SELECT count(*) AS leases_made FROM changefeed.leases
 WHERE table_name = 'start_items'::regclass AND processor = 'too_early';
-- Processors with checkpoints start as before.
SELECT changefeed.lease_init('start_items', 'by_time', start_at => now() - interval '1 day');
SELECT changefeed.position_at('start_items', now() + interval '1 minute') IS NOT NULL AS later_time_ok;
SELECT changefeed.lease_init('start_items', 'later', start_at => now() + interval '1 minute');
RESET ROLE;

DELETE FROM changefeed.horizon
 WHERE collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'start_items'::regclass);
DROP FUNCTION start_delivers(text), start_ids(text);
SELECT changefeed.disable('start_items');
DROP TABLE start_items;
DROP OWNED BY regress_start_owner, regress_start_proc, regress_start_nobody;
DROP ROLE regress_start_owner, regress_start_proc, regress_start_nobody;
