-- Changing the number of ranges of a live collection: alter(tbl, ranges => n)
-- re-tags the logged changes, gives each processor's new ranges the
-- checkpoints of the old ranges their documents came from (exactly, when n is
-- a multiple of the old count; the oldest of them otherwise) and fences
-- running instances.  Nothing a checkpoint had not delivered is lost.
-- Tried as the roles that would do it.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE ROLE regress_rc_owner LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_rc_other_owner LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_rc_proc LOGIN IN ROLE changefeed_processor;
GRANT CREATE ON SCHEMA public TO regress_rc_owner, regress_rc_other_owner;
RESET client_min_messages;

SET ROLE regress_rc_owner;
CREATE TABLE rc (id int PRIMARY KEY, region text NOT NULL, v int);
GRANT SELECT ON rc TO regress_rc_proc;
SELECT changefeed.enable('rc', partition_key => '{region,id}', ranges => 4) AS rc_id \gset
RESET ROLE;

-- History: creates, a TRUNCATE, creates again, updates; the processor's four
-- ranges checkpointed at four different points of it.
INSERT INTO rc SELECT g, 'r' || (g % 7), 0 FROM generate_series(1, 40) g;
SET ROLE regress_rc_proc;
SELECT changefeed.lease_init('rc', 'proj');
SELECT count(*) AS acquired FROM changefeed.lease_acquire('rc', 'proj', 'pod-1', '1 minute');
SELECT changefeed.lease_checkpoint('rc', 'proj', 0, 'pod-1', 1, changefeed.current_position());
RESET ROLE;
TRUNCATE rc;
INSERT INTO rc SELECT g, 'r' || (g % 7), 1 FROM generate_series(1, 60) g;
SET ROLE regress_rc_proc;
SELECT changefeed.lease_checkpoint('rc', 'proj', 1, 'pod-1', 1, changefeed.current_position());
RESET ROLE;
UPDATE rc SET v = 2 WHERE id % 3 = 0;
SET ROLE regress_rc_proc;
SELECT changefeed.lease_checkpoint('rc', 'proj', 2, 'pod-1', 1, changefeed.current_position());
RESET ROLE;
UPDATE rc SET v = 3 WHERE id % 5 = 0;
-- Range 3 stays at the start.

-- What each range still has to deliver, as (seq, doc) pairs, before and after.
CREATE FUNCTION due() RETURNS TABLE (range_id int, seq bigint, operation text, doc_id text)
LANGUAGE sql AS $$
    SELECT l.range_id, r.seq, r.operation, r.doc_id
      FROM changefeed.lease l
     CROSS JOIN LATERAL changefeed.read('rc', l.checkpoint, 100000, ARRAY[l.range_id]) r
     WHERE l.collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'rc'::regclass)
       AND l.processor = 'proj'
$$;
GRANT EXECUTE ON FUNCTION due() TO PUBLIC;
CREATE TABLE due_4 AS SELECT * FROM due();
CREATE TABLE leases_4 AS SELECT range_id, checkpoint, epoch FROM changefeed.lease WHERE processor = 'proj';
SELECT count(*) AS due, count(*) FILTER (WHERE operation = 'clear') AS clears FROM due_4;

-- Only the table's owner changes the ranges, to 1 .. 4096.
SET ROLE regress_rc_proc;
SELECT try($$SELECT changefeed.alter('rc', ranges => 8)$$);
SET ROLE regress_rc_other_owner;
SELECT try($$SELECT changefeed.alter('rc', ranges => 8)$$);
SET ROLE regress_rc_owner;
SELECT try($$SELECT changefeed.alter('rc', ranges => 0)$$);
SELECT try($$SELECT changefeed.alter('rc', ranges => 4097)$$);
SELECT try($$SELECT changefeed.alter('rc', ranges => -1)$$);

-- 4 -> 8: new range r holds documents of old range r mod 4 only and takes its
-- checkpoint as it is; every lease is fenced (no owner, a new epoch).
SELECT changefeed.alter('rc', ranges => 8);
RESET ROLE;
SELECT ranges FROM changefeed.collections WHERE table_name = 'rc'::regclass;
SELECT count(*) AS leases,
       count(*) FILTER (WHERE l.checkpoint = o.checkpoint) AS inherited_exactly,
       count(*) FILTER (WHERE l.owner IS NULL) AS unowned,
       min(l.epoch) = (SELECT max(epoch) + 1 FROM leases_4) AND max(l.epoch) = min(l.epoch) AS new_epoch
  FROM changefeed.lease l JOIN leases_4 o ON o.range_id = l.range_id % 4
 WHERE l.processor = 'proj';
-- Every logged row is in its document's new range; a TRUNCATE has a clear in each.
SELECT count(*) FILTER (WHERE range_id <> changefeed.range_of(partition_key, 8)) AS misplaced,
       count(*) FILTER (WHERE op = 't') AS clears,
       count(DISTINCT range_id) FILTER (WHERE op = 't') AS clear_ranges
  FROM changefeed.log WHERE collection_id = :rc_id;
-- The same changes are due, each in one range: none lost, none added.
CREATE TABLE due_8 AS SELECT * FROM due();
SELECT (SELECT count(*) FROM (SELECT seq, doc_id FROM due_4 WHERE operation <> 'clear'
                              EXCEPT SELECT seq, doc_id FROM due_8) x) AS lost,
       (SELECT count(*) FROM (SELECT seq, doc_id FROM due_8 WHERE operation <> 'clear'
                              EXCEPT SELECT seq, doc_id FROM due_4) x) AS added,
       (SELECT count(*) FROM due_8 WHERE operation <> 'clear')
         = (SELECT count(*) FROM due_4 WHERE operation <> 'clear') AS same_count,
       (SELECT count(*) FROM due_8 WHERE operation = 'clear') AS clears_due;
-- Per document, the same changes in the same order.
SELECT count(*) AS reordered FROM (
    SELECT doc_id, array_agg(seq ORDER BY seq) AS s FROM due_4 WHERE operation <> 'clear' GROUP BY doc_id
    EXCEPT
    SELECT doc_id, array_agg(seq ORDER BY seq) FROM due_8 WHERE operation <> 'clear' GROUP BY doc_id) x;

-- The running instance is fenced: its checkpoints fail, on an old range and a new one.
SET ROLE regress_rc_proc;
SELECT try($$SELECT changefeed.lease_checkpoint('rc', 'proj', 0, 'pod-1', 1, changefeed.current_position())$$);
SELECT try($$SELECT changefeed.lease_checkpoint('rc', 'proj', 6, 'pod-1', 1, changefeed.current_position())$$);
SELECT count(*) AS renewed FROM changefeed.lease_renew('rc', 'proj', 'pod-1', '1 minute');
-- It acquires the new ranges afresh.
SELECT count(*) AS acquired FROM changefeed.lease_acquire('rc', 'proj', 'pod-1', '1 minute');
SELECT try($$SELECT * FROM changefeed.read('rc', changefeed.current_position(), ranges => '{8}')$$);
RESET ROLE;

-- New writes land in the new ranges, as the documented hash says.
INSERT INTO rc VALUES (1000, 'north', 0), (1001, 'south', 0);
SELECT count(*) FILTER (WHERE range_id <> changefeed.range_of(partition_key, 8)) AS misplaced
  FROM changefeed.log WHERE collection_id = :rc_id AND doc_id IN ('1000', '1001');

-- 8 -> 3: not a multiple, so each new range takes the oldest checkpoint of
-- all the old ranges (gcd 1).  Redelivery is allowed, loss is not.
CREATE TABLE due_8b AS SELECT * FROM due();
SET ROLE regress_rc_owner;
SELECT changefeed.alter('rc', ranges => 3);
RESET ROLE;
CREATE TABLE due_3 AS SELECT * FROM due();
SELECT (SELECT count(*) FROM (SELECT seq, doc_id FROM due_8b WHERE operation <> 'clear'
                              EXCEPT SELECT seq, doc_id FROM due_3) x) AS lost,
       (SELECT count(*) FROM due_3 WHERE operation = 'clear') >= 3 AS clears_due;
SELECT count(*) AS leases, count(DISTINCT checkpoint) AS checkpoints, count(*) FILTER (WHERE owner IS NULL) AS unowned
  FROM changefeed.lease WHERE processor = 'proj';
SELECT count(*) FILTER (WHERE range_id <> changefeed.range_of(partition_key, 3)) AS misplaced,
       count(*) FILTER (WHERE op = 't') AS clears
  FROM changefeed.log WHERE collection_id = :rc_id;
-- 3 -> 6 -> 2 and back to 4: still every change due, in order.
SET ROLE regress_rc_owner;
SELECT changefeed.alter('rc', ranges => 6);
SELECT changefeed.alter('rc', ranges => 2);
SELECT changefeed.alter('rc', ranges => 4);
RESET ROLE;
CREATE TABLE due_4b AS SELECT * FROM due();
SELECT (SELECT count(*) FROM (SELECT seq, doc_id FROM due_3 WHERE operation <> 'clear'
                              EXCEPT SELECT seq, doc_id FROM due_4b) x) AS lost,
       (SELECT count(*) FROM (SELECT seq, doc_id FROM due_4b WHERE operation <> 'clear'
                              EXCEPT SELECT seq, doc_id FROM due_3) x) AS added;
SELECT count(*) AS reordered FROM (
    SELECT doc_id, array_agg(DISTINCT seq ORDER BY seq) AS s FROM due_3 WHERE operation <> 'clear' GROUP BY doc_id
    EXCEPT
    SELECT doc_id, array_agg(DISTINCT seq ORDER BY seq) FROM due_4b WHERE operation <> 'clear' GROUP BY doc_id) x;
SELECT count(*) FILTER (WHERE op = 't') AS clears FROM changefeed.log WHERE collection_id = :rc_id;

-- The oldest of several positions has delivered only what all of them have.
SELECT changefeed.current_position() AS p1 \gset
INSERT INTO rc VALUES (2001, 'x', 0);
SELECT changefeed.current_position() AS p2 \gset
-- (Symmetric in what it delivers: its text also carries the WAL position where
-- it was encoded, which a background worker's write may move in between.)
SELECT (changefeed.position_decode(changefeed.oldest_position(ARRAY[:'p2', :'p1']))).lo::text
       = (changefeed.position_decode(changefeed.oldest_position(ARRAY[:'p1', :'p2']))).lo::text AS symmetric,
       (SELECT count(*) FROM changefeed.read('rc', changefeed.oldest_position(ARRAY[:'p1', :'p2'])))
       = (SELECT count(*) FROM changefeed.read('rc', :'p1')) AS as_old_as_p1,
       changefeed.oldest_position(ARRAY[:'p2']) = :'p2' AS one_as_is;
SELECT try($$SELECT changefeed.oldest_position('{}')$$);

-- Backfills in progress: a split carries the scan's progress over; a merge
-- scans the new range again and continues the log from the oldest start.
SET ROLE regress_rc_proc;
SELECT changefeed.lease_init('rc', 'bf', from_beginning => true);
SELECT count(*) AS acquired FROM changefeed.lease_acquire('rc', 'bf', 'pod-b', '1 minute');
SELECT changefeed.lease_backfill_checkpoint('rc', 'bf', r, 'pod-b', 1, jsonb_build_object('id', 10 + r), 5, r = 0)
  FROM generate_series(0, 3) r;
SET ROLE regress_rc_owner;
SELECT changefeed.alter('rc', ranges => 8);
RESET ROLE;
SELECT range_id, backfill_done, backfill_after, backfill_rows, backfill_position = checkpoint AS log_from_start
  FROM changefeed.lease WHERE processor = 'bf' ORDER BY range_id;
SET ROLE regress_rc_owner;
SELECT changefeed.alter('rc', ranges => 2);
RESET ROLE;
SELECT range_id, backfill_done, backfill_after, backfill_rows, backfill_position = checkpoint AS log_from_start
  FROM changefeed.lease WHERE processor = 'bf' ORDER BY range_id;

-- A checkpoint that is no position here (as after a restore) is carried
-- over as it is, split or merged: its ranges report it, never read from now.
UPDATE changefeed.lease SET checkpoint = 'not a position' WHERE processor = 'bf' AND range_id = 1;
SET ROLE regress_rc_owner;
SELECT changefeed.alter('rc', ranges => 3);
RESET ROLE;
SELECT range_id, checkpoint = 'not a position' AS kept_bad FROM changefeed.lease WHERE processor = 'bf' ORDER BY range_id;
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'rc',
                  (SELECT checkpoint FROM changefeed.lease WHERE processor = 'bf' AND range_id = 0)));

-- The same on a disabled collection: CF002 (enable() takes ranges then).
SET ROLE regress_rc_owner;
SELECT changefeed.disable('rc');
SELECT try($$SELECT changefeed.alter('rc', ranges => 5)$$);
SELECT changefeed.enable('rc', partition_key => '{region,id}', ranges => 5) = :rc_id AS same_id;
RESET ROLE;
SELECT count(DISTINCT range_id) AS ranges, count(*) FILTER (WHERE range_id >= 5) AS beyond
  FROM changefeed.lease WHERE processor = 'proj';
SELECT count(*) FILTER (WHERE range_id <> changefeed.range_of(partition_key, 5)) AS misplaced
  FROM changefeed.log WHERE collection_id = :rc_id;

SET ROLE regress_rc_owner;
SELECT changefeed.disable('rc', forget => true);
DROP TABLE rc;
RESET ROLE;
DROP TABLE due_4, due_8, due_8b, due_3, due_4b, leases_4;
DROP FUNCTION due();
DROP OWNED BY regress_rc_owner, regress_rc_other_owner, regress_rc_proc;
DROP ROLE regress_rc_owner, regress_rc_other_owner, regress_rc_proc;
