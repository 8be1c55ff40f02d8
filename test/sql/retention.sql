-- Retention drops whole partitions and records what was lost; a position that
-- had not read it fails with CF006; TTL deletes are marked; maintain() runs all.
\set SHOW_CONTEXT never
CREATE TABLE sessions (id int PRIMARY KEY, who text, expires_at timestamptz);
SELECT changefeed.enable('sessions', retention => '1 day', ttl_column => 'expires_at') IS NOT NULL;
-- Partitions exist for yesterday through a week ahead (UTC days).
SELECT count(*) AS partitions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'changefeed.log'::regclass AND c.relname ~ '^log_[0-9]{8}$';
SELECT start_cursor('stale');       -- never reads again: will lose history
INSERT INTO sessions VALUES (1, 'ada', now() + interval '1 hour'), (2, 'bob', now() - interval '1 hour');
SELECT start_cursor('current');     -- taken after the writes: loses nothing
-- Nothing is old enough yet.
SELECT * FROM changefeed.maintain();
SELECT operation, doc_id, ttl_expired FROM next_changes('current', 'sessions');
-- Acting as if ten days had passed.  Ada's row has expired by then: the
-- current position reads its delete before retention runs.
SELECT changefeed.expire(now() + interval '10 days');
SELECT operation, doc_id, ttl_expired FROM next_changes('current', 'sessions');
-- Today's partition is older than every retention now, so it is dropped (and
-- partitions are created ahead again).
SELECT partitions_dropped > 0 AS dropped, ttl_deleted, failed_steps FROM changefeed.maintain(now() + interval '10 days');
SELECT count(*) AS horizons FROM changefeed.horizon
 WHERE collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'sessions'::regclass);
SELECT count(*) AS rows_left FROM changefeed.log WHERE collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'sessions'::regclass) AND op <> 'd';
-- The stale position lost history: a distinct error, never a silent restart.
SELECT try($$SELECT * FROM next_changes('stale', 'sessions')$$);
-- The current position had read everything that was dropped: it goes on.
SELECT count(*) FROM next_changes('current', 'sessions');
-- Positions taken now are fine too.
SELECT count(*) FROM changefeed.read('sessions', changefeed.current_position());
-- read_ranges() refuses a lost position, alone or beside another (CF006), and
-- reads the ones that lost nothing.
SELECT (SELECT ranges FROM changefeed.collections WHERE table_name = 'sessions'::regclass) AS ranges;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT try($$SELECT * FROM changefeed.read_ranges('sessions', '{0,1}',
                  ARRAY[(SELECT pos FROM cursor_state WHERE name = 'current'), (SELECT pos FROM cursor_state WHERE name = 'stale')], 1)$$);
SELECT try($$SELECT * FROM changefeed.read_ranges('sessions', '{0}', ARRAY[(SELECT pos FROM cursor_state WHERE name = 'stale')])$$);
SELECT count(*) AS markers FROM changefeed.read_ranges('sessions', '{0,1}', ARRAY[changefeed.current_position(), (SELECT pos FROM cursor_state WHERE name = 'current')]) WHERE seq IS NULL;
COMMIT;

-- Retention can be changed; ranges cannot.
SELECT changefeed.alter('sessions', retention => '30 days');
SELECT retention FROM changefeed.collections WHERE table_name = 'sessions'::regclass;
SELECT try($$SELECT changefeed.alter('sessions', retention => '0 days')$$);
SELECT try($$SELECT changefeed.alter('sessions', ttl_column => 'who')$$);
SELECT try($$SELECT changefeed.alter('pg_class')$$);
-- With 30 days of retention, ten days later nothing more is dropped.
SELECT partitions_dropped FROM changefeed.maintain(now() + interval '10 days');

-- Undo the time travel for the tests that follow: today's partition again.
DELETE FROM changefeed.log_default;
SELECT changefeed.create_partitions() > 0 AS recreated;
