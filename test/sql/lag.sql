-- Lag of a processor per range: owner, pending changes, retention used.
\set SHOW_CONTEXT never
CREATE TABLE metrics (id int PRIMARY KEY, v int);
SELECT changefeed.enable('metrics', ranges => 2) IS NOT NULL;
SELECT changefeed.lease_init('metrics', 'dashboard');
SELECT range_id, epoch FROM changefeed.lease_acquire('metrics', 'dashboard', 'pod-1', '1 minute') ORDER BY 1;
INSERT INTO metrics SELECT g, g FROM generate_series(1, 7) g;
SELECT range_id, owner, live, pending, pending_exact, retention_used < 0.01 AS fresh, history_lost
  FROM changefeed.lag('metrics', 'dashboard');
SELECT sum(pending) AS total_pending FROM changefeed.lag('metrics', 'dashboard');
-- A bounded count says so.
SELECT range_id, pending, pending_exact FROM changefeed.lag('metrics', 'dashboard', count_limit => 1);
-- After the owner checkpoints range 0 at the end of what it read, range 0 has nothing pending.
SELECT changefeed.lease_checkpoint('metrics', 'dashboard', 0, 'pod-1', 1,
       (SELECT "position" FROM changefeed.read('metrics', (SELECT checkpoint FROM changefeed.lease
                                                           WHERE processor = 'dashboard' AND range_id = 0), 100, '{0}')
         ORDER BY seq DESC LIMIT 1));
SELECT range_id, pending FROM changefeed.lag('metrics', 'dashboard');
-- Errors.
SELECT try($$SELECT * FROM changefeed.lag('metrics', 'nobody')$$);
SELECT try($$SELECT * FROM changefeed.lag('metrics', '')$$);
SELECT try($$SELECT * FROM changefeed.lag('metrics', 'dashboard', 0)$$);
SELECT try($$SELECT * FROM changefeed.lag('pg_class', 'dashboard')$$);
-- A processor stopped past the retention window: history lost, and fully used.
SELECT partitions_dropped > 0 AS dropped FROM changefeed.maintain(now() + interval '40 days');
SELECT range_id, pending, retention_used, history_lost FROM changefeed.lag('metrics', 'dashboard');
DELETE FROM changefeed.log_default;
SELECT changefeed.create_partitions() > 0 AS recreated;
