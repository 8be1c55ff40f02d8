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

DROP TABLE got, expected;
SELECT changefeed.disable('bulk');
DROP TABLE bulk;
