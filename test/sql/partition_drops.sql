-- Partition retention: DROP and DETACH of a partition of an enabled table
-- are refused, expired (logged as deletes with ttl_expired) or forgotten
-- (nothing logged), as the collection's partition_drops says.
\set SHOW_CONTEXT never
CREATE FUNCTION try_masked(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM, '(collection )[0-9]+', '\1N', 'g');
END
$$;

CREATE TABLE pd_events (day date, id int, tenant text, body text, PRIMARY KEY (day, tenant, id)) PARTITION BY RANGE (day);
CREATE TABLE pd_events_1 PARTITION OF pd_events FOR VALUES FROM ('2026-01-01') TO ('2026-01-02');
CREATE TABLE pd_events_2 PARTITION OF pd_events FOR VALUES FROM ('2026-01-02') TO ('2026-01-03');
CREATE TABLE pd_events_3 PARTITION OF pd_events FOR VALUES FROM ('2026-01-03') TO ('2026-01-04')
    PARTITION BY LIST (tenant);
CREATE TABLE pd_events_3a PARTITION OF pd_events_3 FOR VALUES IN ('a');
CREATE TABLE pd_events_3b PARTITION OF pd_events_3 FOR VALUES IN ('b');
CREATE TABLE pd_events_4 PARTITION OF pd_events FOR VALUES FROM ('2026-01-04') TO ('2026-01-05');
CREATE TABLE pd_events_5 PARTITION OF pd_events FOR VALUES FROM ('2026-01-05') TO ('2026-01-06');
CREATE TABLE plain_table (id int PRIMARY KEY);

-- Bad values, and a table without partitions.
SELECT try_masked($$SELECT changefeed.enable('pd_events', partition_drops => 'delete')$$);
SELECT try_masked($$SELECT changefeed.enable('pd_events', partition_drops => NULL)$$);
SELECT try_masked($$SELECT changefeed.enable('plain_table', partition_drops => 'expire')$$);

-- Default: refuse (CF013), as before.
SELECT changefeed.enable('pd_events', ranges => 4, tenant_column => 'tenant') AS pd_events_id \gset
SELECT partition_drops FROM changefeed.collections WHERE table_name = 'pd_events'::regclass;
INSERT INTO pd_events SELECT d, i, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, 'row ' || i
  FROM generate_series('2026-01-01'::date, '2026-01-05', '1 day') d, generate_series(1, 3) i;
SELECT try_masked('DROP TABLE pd_events_1');
SELECT try_masked('ALTER TABLE pd_events DETACH PARTITION pd_events_1');
-- enable() with other options is CF008; alter() changes it.
SELECT try_masked($$SELECT changefeed.enable('pd_events', ranges => 4, tenant_column => 'tenant', partition_drops => 'expire')$$);
SELECT try_masked($$SELECT changefeed.alter('pd_events', partition_drops => 'sometimes')$$);

-- A role that does not own the table cannot change the option.
CREATE ROLE partition_drops_other;
GRANT changefeed_reader TO partition_drops_other;
GRANT SELECT ON pd_events TO partition_drops_other;
SET ROLE partition_drops_other;
SELECT try_masked($$SELECT changefeed.alter('pd_events', partition_drops => 'forget')$$);
RESET ROLE;
SELECT partition_drops FROM changefeed.collections WHERE table_name = 'pd_events'::regclass;

-- expire: DROP and DETACH log each row as a delete with ttl_expired and the
-- previous image, in the DDL's transaction.
SELECT changefeed.alter('pd_events', partition_drops => 'expire');
SELECT start_cursor('pd_events');
SELECT changefeed.current_position() AS before_drops \gset
BEGIN;
DROP TABLE pd_events_1;
ROLLBACK;
SELECT count(*) AS after_rollback FROM next_changes('pd_events', 'pd_events');
DROP TABLE pd_events_1;
ALTER TABLE pd_events DETACH PARTITION pd_events_2;
DROP TABLE pd_events_3;          -- a partition with partitions of its own
SELECT operation, doc_id, ttl_expired, tenant, previous ->> 'body' AS body
  FROM next_changes('pd_events', 'pd_events') ORDER BY doc_id;
-- The detached table keeps its rows and no trigger of ours.
SELECT count(*) AS detached_rows FROM pd_events_2;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'pd_events_2'::regclass;
SELECT try_masked('TRUNCATE pd_events_2');
DROP TABLE pd_events_2;
-- Log rows match what capture writes for a delete of the same row.
BEGIN;
DELETE FROM pd_events WHERE day = '2026-01-04' AND id = 1;
SELECT doc_id, partition_key, range_id, tenant FROM changefeed.log
 WHERE collection_id = :pd_events_id AND NOT ttl_expired AND op = 'd';
ROLLBACK;
SELECT doc_id, partition_key, range_id, tenant FROM changefeed.log
 WHERE collection_id = :pd_events_id AND ttl_expired AND doc_id = '["2026-01-01","b","1"]';
-- Refused under REPEATABLE READ (its snapshot may miss rows), and
-- DETACH CONCURRENTLY, which commits while writes may still come.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT try_masked('DROP TABLE pd_events_4');
ROLLBACK;
\set VERBOSITY terse
ALTER TABLE pd_events DETACH PARTITION pd_events_4 CONCURRENTLY;
\set VERBOSITY default
-- A drop that does not name the partition is refused: its rows would not be expired.
CREATE SCHEMA side;
CREATE TABLE side.pd_events_6 PARTITION OF pd_events FOR VALUES FROM ('2026-01-06') TO ('2026-01-07');
INSERT INTO pd_events VALUES ('2026-01-06', 1, 'a', 'side');
SELECT try_masked('DROP SCHEMA side CASCADE');
-- A savepoint rolled back takes the expired rows with it: a drop of the
-- partition by another command later in the transaction is refused too.
BEGIN;
SAVEPOINT s;
DROP TABLE side.pd_events_6;
ROLLBACK TO SAVEPOINT s;
SELECT try_masked('DROP SCHEMA side CASCADE');
ROLLBACK;

-- forget: nothing is logged.
SELECT changefeed.alter('pd_events', partition_drops => 'forget');
DROP TABLE pd_events_4;
ALTER TABLE pd_events DETACH PARTITION pd_events_5;
SELECT operation, doc_id, ttl_expired FROM next_changes('pd_events', 'pd_events');  -- the insert above alone
DROP TABLE pd_events_5;
DROP SCHEMA side CASCADE;

-- Capture is intact, and no position reports history lost (no CF006).
SELECT intact, problems FROM changefeed.verify() WHERE table_name = 'pd_events'::regclass;
SELECT count(*) AS horizons FROM changefeed.horizon WHERE collection_id = :pd_events_id;
CREATE TABLE pd_events_7 PARTITION OF pd_events FOR VALUES FROM ('2026-01-07') TO ('2026-01-08');
INSERT INTO pd_events VALUES ('2026-01-07', 1, 'a', 'new');
SELECT operation, doc_id, ttl_expired FROM next_changes('pd_events', 'pd_events');

-- A position from before every drop still reads: the expired deletes, no CF006.
SELECT count(*) FILTER (WHERE ttl_expired) AS expired, count(*) AS changes
  FROM changefeed.read('pd_events', :'before_drops', 1000);

SELECT changefeed.disable('pd_events', forget => true);

-- A table of a role that is no superuser: its rows are read as that role.
CREATE ROLE partition_drops_owner;
GRANT changefeed_reader TO partition_drops_owner;
GRANT CREATE ON SCHEMA public TO partition_drops_owner;
SET ROLE partition_drops_owner;
CREATE TABLE pd_owned (day date, id int, PRIMARY KEY (day, id)) PARTITION BY RANGE (day);
CREATE TABLE pd_owned_1 PARTITION OF pd_owned FOR VALUES FROM ('2026-01-01') TO ('2026-01-02');
CREATE TABLE pd_owned_2 PARTITION OF pd_owned FOR VALUES FROM ('2026-01-02') TO ('2026-01-03');
SELECT changefeed.enable('pd_owned', partition_drops => 'expire') IS NOT NULL AS enabled;
INSERT INTO pd_owned VALUES ('2026-01-01', 1), ('2026-01-01', 2), ('2026-01-02', 3);
SELECT changefeed.current_position() AS owned_start \gset
DROP TABLE pd_owned_1;
SELECT operation, doc_id, ttl_expired, previous ->> 'id' AS id
  FROM changefeed.read('pd_owned', :'owned_start') ORDER BY doc_id;
-- Another role's DROP is refused by PostgreSQL before anything is logged.
RESET ROLE;
SET ROLE partition_drops_other;
SELECT try_masked('DROP TABLE pd_owned_2');
RESET ROLE;
SELECT count(*) AS still_two FROM changefeed.read('pd_owned', :'owned_start');
DROP TABLE pd_owned;
REVOKE CREATE ON SCHEMA public FROM partition_drops_owner;
REVOKE changefeed_reader FROM partition_drops_owner;
DROP ROLE partition_drops_owner;
DROP TABLE pd_events, plain_table;
REVOKE changefeed_reader FROM partition_drops_other;
DROP ROLE partition_drops_other;
