-- Fenced lease writes: a range's checkpoint, its backfill progress and a
-- resync are accepted only from the instance that owns the lease, at the epoch
-- it holds.  Anyone else (a former owner, a stale epoch, a range that does not
-- exist) gets CF010 and changes nothing.
\set SHOW_CONTEXT never
CREATE TABLE fenced (id int PRIMARY KEY, v int);
SELECT changefeed.enable('fenced', ranges => 1) IS NOT NULL AS enabled;
SELECT changefeed.lease_init('fenced', 'proj');
SELECT range_id, epoch FROM changefeed.lease_acquire('fenced', 'proj', 'pod-1', '1 minute');
-- The owner at its epoch writes all three.
SELECT changefeed.lease_backfill_checkpoint('fenced', 'proj', 0, 'pod-1', 1, '{"id": 5}', 5, false);
SELECT backfill_after, backfill_rows, backfill_done FROM changefeed.lease WHERE processor = 'proj';
SELECT changefeed.lease_resync('fenced', 'proj', 0, 'pod-1', 1) IS NOT NULL AS resynced;
SELECT backfill_after, backfill_rows, backfill_done, checkpoint = backfill_position AS from_resync
  FROM changefeed.lease WHERE processor = 'proj';
INSERT INTO fenced VALUES (1, 1);
SELECT changefeed.lease_checkpoint('fenced', 'proj', 0, 'pod-1', 1, changefeed.current_position());
SELECT checkpoint <> backfill_position AS moved FROM changefeed.lease WHERE processor = 'proj';
-- Another instance takes the range over: epoch 2.
SELECT changefeed.lease_steal('fenced', 'proj', 0, 'pod-2', 'pod-1', '1 minute');
CREATE TEMP TABLE before AS SELECT * FROM changefeed.lease WHERE processor = 'proj';
-- The former owner, the new owner at the old epoch, and a range that does not exist.
SELECT try($$SELECT changefeed.lease_checkpoint('fenced', 'proj', 0, 'pod-1', 1, changefeed.current_position())$$);
SELECT try($$SELECT changefeed.lease_checkpoint('fenced', 'proj', 0, 'pod-2', 1, changefeed.current_position())$$);
SELECT try($$SELECT changefeed.lease_checkpoint('fenced', 'proj', 7, 'pod-2', 2, changefeed.current_position())$$);
SELECT try($$SELECT changefeed.lease_backfill_checkpoint('fenced', 'proj', 0, 'pod-1', 1, '{"id": 9}', 9, true)$$);
SELECT try($$SELECT changefeed.lease_backfill_checkpoint('fenced', 'proj', 0, 'pod-2', 1, '{"id": 9}', 9, true)$$);
SELECT try($$SELECT changefeed.lease_resync('fenced', 'proj', 0, 'pod-1', 1)$$);
SELECT try($$SELECT changefeed.lease_resync('fenced', 'proj', 0, 'pod-2', 1)$$);
-- None of them changed the lease.
SELECT (SELECT count(*) FROM changefeed.lease l JOIN before b USING (collection_id, processor, range_id)
         WHERE (l.*)::text = (b.*)::text) AS unchanged;
-- The new owner at its epoch writes.
SELECT changefeed.lease_checkpoint('fenced', 'proj', 0, 'pod-2', 2, changefeed.current_position());
SELECT owner, epoch FROM changefeed.lease WHERE processor = 'proj';
SELECT changefeed.disable('fenced');
DROP TABLE fenced;

-- An idle instance: a balancing step or renewal that finds no lease changed
-- hands answers in one row (the generation it was given) and writes no lease.
CREATE TABLE idle_items (id int PRIMARY KEY);
SELECT changefeed.enable('idle_items', ranges => 8) IS NOT NULL AS enabled;
SELECT changefeed.lease_init('idle_items', 'proj');
SELECT count(range_id) AS listed, max(generation) AS g
  FROM changefeed.lease_balance('idle_items', 'proj', 'pod-1', '1 minute') \gset
SELECT :listed AS listed;
CREATE TEMP TABLE idle_before AS
SELECT range_id, xmin::text AS x FROM changefeed.lease l
 WHERE l.collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'idle_items'::regclass);
SELECT count(*) AS answer_rows, count(range_id) AS listed
  FROM changefeed.lease_balance('idle_items', 'proj', 'pod-1', '1 minute', :g);
SELECT count(*) AS answer_rows, count(range_id) AS listed
  FROM changefeed.lease_keep('idle_items', 'proj', 'pod-1', '1 minute', :g);
SELECT count(*) AS rewritten FROM changefeed.lease l JOIN idle_before b USING (range_id)
 WHERE l.xmin::text <> b.x
   AND l.collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'idle_items'::regclass);
-- A caller that knows another generation gets its leases listed.
SELECT count(range_id) AS listed FROM changefeed.lease_keep('idle_items', 'proj', 'pod-1', '1 minute', :g - 1);
-- A takeover moves the generation: the former owner's next renewal lists what it still owns.
SELECT changefeed.lease_steal('idle_items', 'proj', 3, 'pod-2', 'pod-1', '1 minute');
SELECT count(range_id) AS listed, bool_and(generation > :g) AS moved
  FROM changefeed.lease_keep('idle_items', 'proj', 'pod-1', '1 minute', :g);
-- One expiry per instance: once pod-1's has passed, all its leases are free,
-- pod-2 takes them in one step (new epochs), and pod-1's renewal holds none.
UPDATE changefeed.holder SET expires_at = now() - interval '1 second' WHERE processor = 'proj' AND instance = 'pod-1';
SELECT owner, live, count(*) FROM changefeed.leases WHERE table_name = 'idle_items'::regclass GROUP BY 1, 2 ORDER BY 1;
SELECT count(*) AS taken FROM changefeed.lease_acquire('idle_items', 'proj', 'pod-2', '1 minute');
SELECT count(range_id) AS listed FROM changefeed.lease_keep('idle_items', 'proj', 'pod-1', '1 minute');
SELECT owner, live, count(*), min(epoch) AS min_epoch FROM changefeed.leases
 WHERE table_name = 'idle_items'::regclass GROUP BY 1, 2 ORDER BY 1;
-- Released on stop: the instance's expiry goes with its leases.
SELECT changefeed.lease_release('idle_items', 'proj', 'pod-2');
SELECT count(*) AS holders FROM changefeed.holder WHERE processor = 'proj' AND instance = 'pod-2';
SELECT changefeed.disable('idle_items');
DROP TABLE idle_items;
