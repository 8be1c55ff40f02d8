-- wait_for(): returns once a processor's checkpoints cover every change
-- committed before a position, in every range; CF023 naming the ranges behind
-- when they do not within the timeout.
\set SHOW_CONTEXT never
CREATE TABLE wf_orders (id int PRIMARY KEY, v int);
SELECT changefeed.enable('wf_orders', ranges => 2) IS NOT NULL;
SELECT changefeed.lease_init('wf_orders', 'proj');
SELECT count(*) FROM changefeed.lease_acquire('wf_orders', 'proj', 'pod-1', '1 minute');
-- Nothing written since the processor's start: nothing to wait for.
SELECT changefeed.wait_for('wf_orders', 'proj', changefeed.current_position(), '0 seconds');
INSERT INTO wf_orders SELECT g, g FROM generate_series(1, 6) g;
SELECT changefeed.current_position() AS after_six \gset
-- Not handled yet: both ranges are behind, each named with its count.
SELECT try($$SELECT changefeed.wait_for('wf_orders', 'proj', '$$ || :'after_six' || $$', '20 milliseconds')$$);
SELECT set_config('wf.after_six', :'after_six', false) IS NOT NULL AS kept;
DO $$
DECLARE
    detail text;
BEGIN
    PERFORM changefeed.wait_for('wf_orders', 'proj', current_setting('wf.after_six'), '0 seconds');
EXCEPTION WHEN SQLSTATE 'CF023' THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RAISE NOTICE '%', detail;
END
$$;
SELECT range_id, pending FROM changefeed.ranges_behind(
    (SELECT c FROM changefeed.collection c WHERE relid = 'wf_orders'::regclass), 'proj', :'after_six') ORDER BY 1;
-- Range 0 checkpointed at the end of what it read: only range 1 is behind.
SELECT changefeed.lease_checkpoint('wf_orders', 'proj', 0, 'pod-1', 1,
       (SELECT "position" FROM changefeed.read('wf_orders', (SELECT checkpoint FROM changefeed.lease
                                                             WHERE processor = 'proj' AND range_id = 0), 100, '{0}')
         ORDER BY seq DESC LIMIT 1));
SELECT range_id, pending FROM changefeed.ranges_behind(
    (SELECT c FROM changefeed.collection c WHERE relid = 'wf_orders'::regclass), 'proj', :'after_six') ORDER BY 1;
SELECT changefeed.lease_checkpoint('wf_orders', 'proj', 1, 'pod-1', 1,
       (SELECT "position" FROM changefeed.read('wf_orders', (SELECT checkpoint FROM changefeed.lease
                                                             WHERE processor = 'proj' AND range_id = 1), 100, '{1}')
         ORDER BY seq DESC LIMIT 1));
SELECT changefeed.wait_for('wf_orders', 'proj', :'after_six', '0 seconds');
-- A later write is not covered; a position from before it still is.
INSERT INTO wf_orders VALUES (7, 7);
SELECT changefeed.wait_for('wf_orders', 'proj', :'after_six', '0 seconds');
SELECT try($$SELECT changefeed.wait_for('wf_orders', 'proj', changefeed.current_position(), '0 seconds')$$);
-- Errors: a damaged position, a bad timeout, a name that never ran, a
-- snapshot that cannot move.
SELECT try($$SELECT changefeed.wait_for('wf_orders', 'proj', 'cf2.garbage', '0 seconds')$$);
SELECT try($$SELECT changefeed.wait_for('wf_orders', 'proj', changefeed.current_position(), '2 hours')$$);
SELECT try($$SELECT changefeed.wait_for('wf_orders', 'nobody', changefeed.current_position(), '0 seconds')$$);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT try($$SELECT changefeed.wait_for('wf_orders', 'proj', changefeed.current_position(), '0 seconds')$$);
ROLLBACK;
-- A role that may not watch the processor is refused.
CREATE ROLE regress_wf_stranger LOGIN IN ROLE changefeed_reader;
GRANT SELECT ON wf_orders TO regress_wf_stranger;
SET ROLE regress_wf_stranger;
SELECT try($$SELECT changefeed.wait_for('wf_orders', 'proj', changefeed.current_position(), '0 seconds')$$);
-- position_covers(): for readers keeping their own position; any reader may ask.
SELECT changefeed.position_covers(current_setting('wf.after_six'), changefeed.current_position()) AS old_covers_new,
       changefeed.position_covers(changefeed.current_position(), current_setting('wf.after_six')) AS new_covers_old,
       changefeed.position_covers(current_setting('wf.after_six'), current_setting('wf.after_six')) AS covers_itself;
SELECT try($$SELECT changefeed.position_covers('cf2.garbage', changefeed.current_position())$$);
RESET ROLE;
DROP TABLE wf_orders;
DROP ROLE regress_wf_stranger;
