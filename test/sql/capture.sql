-- Capture: what each write puts into the log.
\set SHOW_CONTEXT never
CREATE TABLE docs (id int PRIMARY KEY, body jsonb, note text, deleted bool DEFAULT false);
SELECT changefeed.enable('docs') AS docs_id \gset
SELECT start_cursor('docs');

INSERT INTO docs VALUES (1, '{"a": 1, "b": {"c": 2}}', 'first'), (2, '{"a": 2}', 'second');
-- One column updated: the whole row arrives, with the previous image.
UPDATE docs SET note = 'changed' WHERE id = 1;
-- A jsonb_set patch: still the whole row.
UPDATE docs SET body = jsonb_set(body, '{b,c}', '3') WHERE id = 1;
DELETE FROM docs WHERE id = 2;
SELECT * FROM next_changes('docs', 'docs');

-- A changed primary key is a delete of the old document and a create of the new.
UPDATE docs SET id = 10 WHERE id = 1;
SELECT operation, doc_id, current ->> 'id' AS cur, previous ->> 'id' AS prev FROM next_changes('docs', 'docs');

-- Rolled back writes leave nothing: whole transaction and savepoint.
BEGIN;
INSERT INTO docs VALUES (3, '{}', 'rolled back');
ROLLBACK;
BEGIN;
INSERT INTO docs VALUES (4, '{}', 'kept');
SAVEPOINT s;
INSERT INTO docs VALUES (5, '{}', 'rolled back to savepoint');
UPDATE docs SET note = 'rolled back too' WHERE id = 4;
ROLLBACK TO SAVEPOINT s;
INSERT INTO docs VALUES (6, '{}', 'kept too');
COMMIT;
SELECT operation, doc_id, current ->> 'note' AS note FROM next_changes('docs', 'docs');

-- TTL deletes are marked, other deletes are not.
BEGIN;
SET LOCAL changefeed.delete_reason = 'ttl';
DELETE FROM docs WHERE id = 4;
COMMIT;
DELETE FROM docs WHERE id = 6;
SELECT operation, doc_id, ttl_expired FROM next_changes('docs', 'docs');

-- TRUNCATE: one clear per range.
TRUNCATE docs;
SELECT operation, count(*), count(DISTINCT range_id) AS ranges FROM next_changes('docs', 'docs') GROUP BY 1;

-- Without previous images; with a tenant column; composite keys.
CREATE TABLE orders (region text, order_no int, tenant text, total numeric, PRIMARY KEY (region, order_no));
SELECT changefeed.enable('orders', keep_previous => false, tenant_column => 'tenant', ranges => 4) IS NOT NULL;
SELECT start_cursor('orders');
INSERT INTO orders VALUES ('eu', 1, 'acme', 10.5), ('us/east', 2, 'globex', 7);
UPDATE orders SET total = 11 WHERE order_no = 1;
DELETE FROM orders WHERE order_no = 2;
SELECT operation, doc_id, current, previous, tenant FROM next_changes('orders', 'orders');
SELECT DISTINCT partition_key FROM changefeed.log WHERE collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'orders'::regclass) ORDER BY 1;

-- Range ids follow the documented hash: FNV-1a 32 of the partition key text, mod ranges.
SELECT changefeed.range_of('1', 16) AS r1, changefeed.range_of('user-42', 1024) AS r2,
       changefeed.range_of('', 7) AS r3;
SELECT count(*) AS rows, bool_and(l.range_id = changefeed.range_of(l.partition_key, c.ranges)) AS all_match
  FROM changefeed.log l JOIN changefeed.collections c ON c.id = l.collection_id WHERE l.op <> 't';

-- A partition key other than the primary key.
CREATE TABLE events (id int PRIMARY KEY, device text);
SELECT changefeed.enable('events', partition_key => '{device}', ranges => 8) IS NOT NULL;
INSERT INTO events VALUES (1, 'dev-a'), (2, 'dev-a'), (3, 'dev-b');
SELECT doc_id, partition_key, range_id = changefeed.range_of(device, 8) AS hashed
  FROM changefeed.log l JOIN events e ON e.id::text = l.doc_id
 WHERE collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'events'::regclass)
 ORDER BY seq;

-- The log: time-partitioned, a single index.
SELECT relkind FROM pg_class WHERE oid = 'changefeed.log'::regclass;
SELECT count(*) >= 8 AS has_daily_partitions FROM pg_inherits WHERE inhparent = 'changefeed.log'::regclass;
SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'changefeed.log'::regclass;
-- Rows land in the day's partition, not the default one.
SELECT count(*) AS in_default FROM changefeed.log_default;

-- A writer needs no privilege on the change log.
CREATE ROLE changefeed_writer;
CREATE TABLE shared_notes (id int PRIMARY KEY, body text);
GRANT INSERT, UPDATE, DELETE, SELECT ON shared_notes TO changefeed_writer;
SELECT changefeed.enable('shared_notes') IS NOT NULL;
SELECT start_cursor('notes');
SET ROLE changefeed_writer;
INSERT INTO shared_notes VALUES (1, 'written by an unprivileged role');
SELECT try($$SELECT count(*) FROM changefeed.log$$);
RESET ROLE;
SELECT operation, doc_id, current ->> 'body' AS body FROM next_changes('notes', 'shared_notes');
SELECT changefeed.disable('shared_notes');
DROP TABLE shared_notes;
DROP ROLE changefeed_writer;
