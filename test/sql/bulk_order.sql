-- Bulk statements: every row of a multi-row statement reaches the log in
-- statement order and per-document order, with savepoints rolled back and
-- released between and around them, and statements of many thousand rows.
\set SHOW_CONTEXT never
CREATE TABLE bulk (id int PRIMARY KEY, stmt int NOT NULL, v int NOT NULL);
SELECT changefeed.enable('bulk', ranges => 4) IS NOT NULL AS enabled;
SELECT start_cursor('bulk');
-- What each statement is expected to leave, per document: (statement, v).
CREATE TABLE expected (id int, stmt int, op text, v int);

BEGIN;
-- A savepoint opened before the transaction's first write, rolled back.
SAVEPOINT first;
INSERT INTO bulk SELECT g, 0, -1 FROM generate_series(1, 6000) g;
ROLLBACK TO SAVEPOINT first;
-- 1: create 6000 documents.
INSERT INTO bulk SELECT g, 1, g FROM generate_series(1, 6000) g;
-- A multi-row update in a savepoint, rolled back between two bulk statements.
SAVEPOINT s;
UPDATE bulk SET stmt = -2, v = v + 1000000 WHERE id % 2 = 0;
ROLLBACK TO SAVEPOINT s;
-- 2: update the first 4000.
UPDATE bulk SET stmt = 2, v = v + 10 WHERE id <= 4000;
-- 3: in a released savepoint, update the last 4000.
SAVEPOINT r;
UPDATE bulk SET stmt = 3, v = v + 100 WHERE id > 2000;
RELEASE SAVEPOINT r;
-- A rolled-back PL/pgSQL block in the middle of the transaction.
DO $$
BEGIN
    UPDATE bulk SET stmt = -4, v = 0;
    RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN NULL;
END $$;
-- DDL between statements of one transaction.
ALTER TABLE bulk ADD COLUMN extra int;
-- 5: delete every third document.
DELETE FROM bulk WHERE id % 3 = 0;
-- 6: a savepoint opened inside another, released, then the outer rolled back.
SAVEPOINT outer_sp;
SAVEPOINT inner_sp;
UPDATE bulk SET stmt = -6, v = 0 WHERE id <= 100;
RELEASE SAVEPOINT inner_sp;
ROLLBACK TO SAVEPOINT outer_sp;
UPDATE bulk SET stmt = 6, v = v + 1000 WHERE id % 3 = 1;
COMMIT;

INSERT INTO expected SELECT g, 1, 'create', g FROM generate_series(1, 6000) g;
INSERT INTO expected SELECT g, 2, 'replace', g + 10 FROM generate_series(1, 4000) g;
INSERT INTO expected SELECT g, 3, 'replace', g + 100 + CASE WHEN g <= 4000 THEN 10 ELSE 0 END
    FROM generate_series(2001, 6000) g;
INSERT INTO expected SELECT id, 5, 'delete', NULL FROM generate_series(3, 6000, 3) id;
INSERT INTO expected
    SELECT g, 6, 'replace', g + 1000 + CASE WHEN g <= 4000 THEN 10 ELSE 0 END + CASE WHEN g > 2000 THEN 100 ELSE 0 END
    FROM generate_series(1, 6000) g WHERE g % 3 = 1;

CREATE TABLE got AS
    SELECT seq, range_id, operation AS op, doc_id::int AS id,
           coalesce(current, previous) ->> 'stmt' AS stmt, (current ->> 'v')::int AS v
    FROM next_changes('bulk', 'bulk', 100000);
-- Nothing rolled back came out; every statement's rows did.
SELECT stmt, op, count(*) FROM got GROUP BY 1, 2 ORDER BY 1, 2;
-- A delete carries the previous image: its statement is the last one that wrote the row.
-- Statement order: in seq order, no row of a later statement comes before one of an earlier.
SELECT count(*) AS out_of_statement_order
FROM (SELECT op, stmt::int AS s, lag(stmt::int) OVER (ORDER BY seq) AS prev_s,
             lag(op) OVER (ORDER BY seq) AS prev_op
      FROM got) o
WHERE (CASE WHEN op = 'delete' THEN 5 ELSE s END) < (CASE WHEN prev_op = 'delete' THEN 5 ELSE prev_s END);
-- Within each range too (the order a reader sees).
SELECT count(*) AS out_of_range_order
FROM (SELECT range_id, seq, lag(seq) OVER (PARTITION BY range_id ORDER BY seq) AS prev_seq FROM got) o
WHERE seq <= prev_seq;
-- Per-document order: each document's changes, in seq order, are exactly the expected ones.
SELECT count(*) AS documents_differing
FROM (SELECT id, string_agg(op || ':' || coalesce(v::text, '-'), ' ' ORDER BY seq) AS changes FROM got GROUP BY id) g
FULL JOIN (SELECT id, string_agg(op || ':' || coalesce(v::text, '-'), ' ' ORDER BY stmt) AS changes
           FROM expected GROUP BY id) e USING (id)
WHERE g.changes IS DISTINCT FROM e.changes;
-- The log agrees with the table.
SELECT count(*) AS rows_differing
FROM (SELECT DISTINCT ON (id) id, op, v FROM got ORDER BY id, seq DESC) l
FULL JOIN bulk b USING (id)
WHERE (l.op = 'delete') IS DISTINCT FROM (b.id IS NULL) OR (b.id IS NOT NULL AND l.v IS DISTINCT FROM b.v);

-- A statement failing in the middle of its rows' capture (another AFTER
-- trigger, fired after the capture of each row, fails at the fifth row),
-- inside a subtransaction of a transaction that goes on writing.
CREATE FUNCTION fail_at_five() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.v = -5 THEN RAISE EXCEPTION 'fifth row'; END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER zz_fail_at_five AFTER UPDATE ON bulk FOR EACH ROW EXECUTE FUNCTION fail_at_five();
SELECT start_cursor('bulk');
BEGIN;
SAVEPOINT pre;
UPDATE bulk SET stmt = 7, v = 7 WHERE id <= 10;
RELEASE SAVEPOINT pre;
SAVEPOINT a;
SELECT try('UPDATE bulk SET stmt = -8, v = -id WHERE id <= 10');
UPDATE bulk SET stmt = 8, v = 8 WHERE id <= 10;
ROLLBACK TO SAVEPOINT a;
UPDATE bulk SET stmt = 9, v = 9 WHERE id <= 10;
COMMIT;
SELECT op, id, stmt, v FROM (SELECT seq, operation AS op, doc_id::int AS id, current ->> 'stmt' AS stmt, current ->> 'v' AS v
                              FROM next_changes('bulk', 'bulk', 1000)) c
ORDER BY id, seq;

-- Subtransactions in the middle of a statement's batch of rows: another
-- AFTER trigger opens an exception block for every third row, before any
-- query of its own (the rows captured so far still wait to be inserted),
-- writes a captured side table in it and rolls every other block back; after
-- the block it counts the transaction's rows in the log, which must be every
-- row captured so far.
DROP TRIGGER zz_fail_at_five ON bulk;
CREATE TABLE mid (id int PRIMARY KEY, v int NOT NULL);
CREATE TABLE side (id serial PRIMARY KEY, src int NOT NULL, pass int NOT NULL);
SELECT changefeed.enable('mid', ranges => 3) IS NOT NULL AS enabled;
SELECT changefeed.enable('side') IS NOT NULL AS enabled;
CREATE TABLE seen (ord serial, id int, pass int, log_rows bigint);
CREATE FUNCTION side_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id % 3 = 0 THEN
        BEGIN
            INSERT INTO side (src, pass) VALUES (NEW.id, NEW.v);
            IF NEW.id % 2 = 1 THEN RAISE EXCEPTION 'undo'; END IF;
        EXCEPTION WHEN raise_exception THEN NULL;
        END;
        INSERT INTO seen (id, pass, log_rows)
            SELECT NEW.id, NEW.v, count(*) FROM changefeed.log WHERE txid = pg_current_xact_id();
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER zz_side AFTER INSERT OR UPDATE ON mid FOR EACH ROW EXECUTE FUNCTION side_write();
SELECT start_cursor('mid');
SELECT start_cursor('side');
BEGIN;
INSERT INTO mid SELECT g, 0 FROM generate_series(1, 30) g;
SAVEPOINT u;
UPDATE mid SET v = 1;
RELEASE SAVEPOINT u;
COMMIT;
-- Row k of the insert sees k rows of mid and one side row per kept block
-- (every sixth row) so far; row k of the update 35 more.
SELECT count(*) AS counts, count(*) FILTER (WHERE log_rows <> pass * 35 + id + id / 6) AS counts_wrong
FROM seen;
-- Each document of mid: created, then replaced, in that order; the side
-- table: the kept blocks' rows alone, in the order they were written.
SELECT count(*) AS documents_differing
FROM (SELECT doc_id::int AS id, string_agg(operation || ':' || (current ->> 'v'), ' ' ORDER BY seq) AS changes
      FROM next_changes('mid', 'mid', 1000) GROUP BY 1) g
FULL JOIN (SELECT g AS id, 'create:0 replace:1' AS changes FROM generate_series(1, 30) g) e USING (id)
WHERE g.changes IS DISTINCT FROM e.changes;
SELECT string_agg(operation || ':' || (current ->> 'src') || '/' || (current ->> 'pass'), ' ' ORDER BY seq) AS side_changes
FROM next_changes('side', 'side', 1000);
-- The log's order is the order of capture across the two tables.
SELECT count(*) AS side_rows_out_of_order
FROM (SELECT l.seq, (l.current ->> 'src')::int AS src, (l.current ->> 'pass')::int AS pass,
             (SELECT max(m.seq) FROM changefeed.log m
              WHERE m.collection_id = (SELECT id FROM changefeed.collection WHERE relid = 'mid'::regclass)
                AND m.doc_id = (l.current ->> 'src')
                AND (m.current ->> 'v')::int = (l.current ->> 'pass')::int) AS mid_seq,
             (SELECT min(m.seq) FROM changefeed.log m
              WHERE m.collection_id = (SELECT id FROM changefeed.collection WHERE relid = 'mid'::regclass)
                AND (m.doc_id)::int = (l.current ->> 'src')::int + 1
                AND (m.current ->> 'v')::int = (l.current ->> 'pass')::int) AS next_mid_seq
      FROM changefeed.log l
      WHERE l.collection_id = (SELECT id FROM changefeed.collection WHERE relid = 'side'::regclass)) s
WHERE NOT (mid_seq < seq AND (next_mid_seq IS NULL OR seq < next_mid_seq));
DROP TABLE seen;
SELECT changefeed.disable('mid'), changefeed.disable('side');
DROP TABLE mid, side;
DROP FUNCTION side_write();

-- DDL on the log inside a subtransaction begun while a statement's rows
-- wait: the partition they wait for stays open until they are in, so DDL on
-- it is refused (and on the other partitions allowed); the rows all arrive.
CREATE TABLE ddl_mid (id int PRIMARY KEY, v int NOT NULL);
SELECT changefeed.enable('ddl_mid') IS NOT NULL AS enabled;
CREATE TABLE ddl_seen (id int, refused int, allowed int, refused_state text);
CREATE FUNCTION ddl_write() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE p regclass; refused int := 0; allowed int := 0; state text;
BEGIN
    IF NEW.id = 4 THEN
        -- The block begins before any query of the trigger's: the rows
        -- captured so far still wait.
        BEGIN
            FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'changefeed.log'::regclass LOOP
                BEGIN
                    PERFORM changefeed.keep_log_rows_whole(p);
                    allowed := allowed + 1;
                EXCEPTION WHEN object_in_use THEN
                    refused := refused + 1;
                    state := SQLSTATE;
                END;
            END LOOP;
            INSERT INTO ddl_seen VALUES (NEW.id, refused, allowed, state);
        EXCEPTION WHEN raise_exception THEN NULL;
        END;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER zz_ddl AFTER INSERT ON ddl_mid FOR EACH ROW EXECUTE FUNCTION ddl_write();
SELECT start_cursor('ddl_mid');
INSERT INTO ddl_mid SELECT g, g FROM generate_series(1, 10) g;
SELECT refused, allowed = (SELECT count(*) - 1 FROM pg_inherits WHERE inhparent = 'changefeed.log'::regclass) AS others_allowed,
       refused_state
FROM ddl_seen;
SELECT string_agg(operation || ':' || doc_id, ' ' ORDER BY seq) AS changes FROM next_changes('ddl_mid', 'ddl_mid', 100);
SELECT changefeed.disable('ddl_mid');
DROP TABLE ddl_mid, ddl_seen;
DROP FUNCTION ddl_write();

-- Many subtransactions in one transaction, each writing a row and every
-- third rolled back; a multi-row statement in each fifth.
CREATE TABLE loop_rows (id int PRIMARY KEY, n int NOT NULL);
SELECT changefeed.enable('loop_rows') IS NOT NULL AS enabled;
SELECT start_cursor('loop_rows');
DO $$
BEGIN
    FOR i IN 1 .. 3000 LOOP
        BEGIN
            INSERT INTO loop_rows VALUES (i, 1);
            IF i % 5 = 0 THEN UPDATE loop_rows SET n = n + 1 WHERE id > i - 5; END IF;
            IF i % 3 = 0 THEN RAISE EXCEPTION 'undo'; END IF;
        EXCEPTION WHEN raise_exception THEN NULL;
        END;
    END LOOP;
END $$;
SELECT count(*) AS documents_differing
FROM (SELECT doc_id::int AS id, string_agg(operation || ':' || (current ->> 'n'), ' ' ORDER BY seq) AS changes
      FROM next_changes('loop_rows', 'loop_rows', 100000) GROUP BY 1) g
-- Document i is created, and replaced (n = 2) by the update of the block of
-- five it falls in unless that block was rolled back.
FULL JOIN (SELECT i AS id, 'create:1' || CASE WHEN ((i + 4) / 5 * 5) % 3 <> 0 THEN ' replace:2' ELSE '' END AS changes
           FROM generate_series(1, 3000) i WHERE i % 3 <> 0) e USING (id)
WHERE g.changes IS DISTINCT FROM e.changes;
SELECT changefeed.disable('loop_rows');
DROP TABLE loop_rows;

-- The log keeps a change of a 2 KB document whole in its page, both images
-- and uncompressed: nothing of it goes to the TOAST table.  A change larger
-- than a page is toasted as before and reads back whole.
SELECT count(*) > 0 AS partitions, count(*) = count(*) FILTER (WHERE c.reloptions @> ARRAY['toast_tuple_target=8160'])
       AS every_partition_keeps_rows_whole
FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'changefeed.log'::regclass;
CREATE TABLE wide (id int PRIMARY KEY, doc jsonb NOT NULL);
SELECT changefeed.enable('wide') IS NOT NULL AS enabled;
SELECT start_cursor('wide');
CREATE FUNCTION toasted_log_rows() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint := 0; k bigint; p regclass;
BEGIN
    FOR p IN SELECT c.reltoastrelid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
              WHERE i.inhparent = 'changefeed.log'::regclass AND c.reltoastrelid <> 0 LOOP
        EXECUTE format('SELECT count(DISTINCT chunk_id) FROM %s', p) INTO k;
        n := n + k;
    END LOOP;
    RETURN n;
END $$;
SELECT toasted_log_rows() AS toasted_before \gset
INSERT INTO wide SELECT g, jsonb_build_object('body', (SELECT string_agg(md5(g::text || i::text), '') FROM generate_series(1, 56) i))
FROM generate_series(1, 20) g;
UPDATE wide SET doc = doc || '{"n": 1}';
SELECT toasted_log_rows() - :toasted_before AS toasted_2kb;
UPDATE wide SET doc = doc || jsonb_build_object('more', (SELECT string_agg(md5(id::text || i::text), '') FROM generate_series(1, 300) i))
WHERE id = 1;
SELECT toasted_log_rows() - :toasted_before AS toasted_with_a_10kb_change;
SELECT operation, count(*), bool_and(length(current -> 'doc' ->> 'body') = 1792) AS whole,
       bool_and(previous IS NULL OR length(previous -> 'doc' ->> 'body') = 1792) AS previous_whole,
       max(length(current -> 'doc' ->> 'more')) AS more
FROM next_changes('wide', 'wide', 1000) GROUP BY 1 ORDER BY 1;
DROP FUNCTION toasted_log_rows();
SELECT changefeed.disable('wide');
DROP TABLE wide;

DROP TABLE got, expected;
SELECT changefeed.disable('bulk');
DROP TABLE bulk;
