-- Prepared transactions (two-phase commit) of captured writes.  Preloaded
-- only: without the library preloaded each writing transaction sends its
-- NOTIFY itself, and PostgreSQL cannot prepare a transaction that notified.
\set SHOW_CONTEXT never
-- A prepared transaction: its rows (a savepoint's rolled back between two
-- bulk statements) are not read while it is prepared, a later transaction's
-- row is, and the position read past that row does not skip the prepared
-- rows: all of them come out once it commits.
CREATE TABLE prep (id int PRIMARY KEY, v int NOT NULL);
SELECT changefeed.enable('prep', ranges => 2) IS NOT NULL AS enabled;
SELECT start_cursor('prep');
BEGIN;
INSERT INTO prep SELECT g, 1 FROM generate_series(1, 2500) g;
SAVEPOINT s;
UPDATE prep SET v = -1;
ROLLBACK TO SAVEPOINT s;
UPDATE prep SET v = 2 WHERE id % 2 = 0;
PREPARE TRANSACTION 'changefeed_bulk_order';
INSERT INTO prep VALUES (100000, 3);
SELECT string_agg(operation || ':' || doc_id, ' ') AS read_while_prepared FROM next_changes('prep', 'prep', 100000);
COMMIT PREPARED 'changefeed_bulk_order';
CREATE TABLE prep_got AS SELECT * FROM next_changes('prep', 'prep', 100000);
SELECT operation, current ->> 'v' AS v, count(*) FROM prep_got GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS documents_differing
FROM (SELECT doc_id::int AS id, string_agg(operation || ':' || (current ->> 'v'), ' ' ORDER BY seq) AS changes
      FROM prep_got GROUP BY 1) g
FULL JOIN (SELECT g AS id, 'create:1' || CASE WHEN g % 2 = 0 THEN ' replace:2' ELSE '' END AS changes
           FROM generate_series(1, 2500) g) e USING (id)
WHERE g.changes IS DISTINCT FROM e.changes;
DROP TABLE prep_got;
SELECT changefeed.disable('prep');
DROP TABLE prep;
