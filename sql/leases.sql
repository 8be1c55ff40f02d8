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
