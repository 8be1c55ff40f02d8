-- Memory a reading backend keeps between reads (read_memory.cpp): the result
-- set outlives the read that made it, so every way a result can be held,
-- abandoned or nested must still see the right rows.
\set SHOW_CONTEXT never
CREATE TABLE rm_docs (id int PRIMARY KEY, body text);
CREATE TABLE rm_other (id int PRIMARY KEY);
SELECT changefeed.enable('rm_docs', ranges => 4) IS NOT NULL, changefeed.enable('rm_other') IS NOT NULL;
CREATE TABLE rm_pos AS SELECT changefeed.current_position() AS p;
INSERT INTO rm_docs SELECT g, repeat('x', 100) || g FROM generate_series(1, 3000) g;
INSERT INTO rm_other SELECT g FROM generate_series(1, 7) g;
-- What every read below must return, taken without kept memory.
SET changefeed.read_memory_kept = 0;
CREATE TABLE rm_truth AS SELECT seq, doc_id, current FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000);
SELECT count(*) FROM rm_truth;
RESET changefeed.read_memory_kept;
-- rm_same(q): whether q's rows (seq, doc_id, current, position) are the
-- truth's, and every 250th position resumes right after its row (positions
-- name the WAL point they were made at, so their text differs read to read).
CREATE FUNCTION rm_same(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    diff bigint;
    wrong bigint;
BEGIN
    EXECUTE 'CREATE TEMP TABLE rm_got AS ' || q;
    SELECT count(*) INTO diff FROM ((SELECT * FROM rm_truth EXCEPT SELECT seq, doc_id, current FROM rm_got)
                                    UNION ALL (SELECT seq, doc_id, current FROM rm_got EXCEPT SELECT * FROM rm_truth)) d;
    SELECT count(*) INTO wrong FROM rm_got g
     WHERE g.seq % 250 = 0
       AND (SELECT n.seq FROM changefeed.read('rm_docs', g.position, 1) n) IS DISTINCT FROM
           (SELECT min(t.seq) FROM rm_truth t WHERE t.seq > g.seq);
    DROP TABLE rm_got;
    RETURN CASE WHEN diff = 0 AND wrong = 0 THEN 'same' ELSE diff || ' rows differ, ' || wrong || ' positions wrong' END;
END
$$;

-- Kept memory returns the same rows and positions, read after read.
SELECT rm_same('SELECT seq, doc_id, current, position FROM changefeed.read(''rm_docs'', (SELECT p FROM rm_pos), 5000)');
SELECT rm_same('SELECT seq, doc_id, current, position FROM changefeed.read(''rm_docs'', (SELECT p FROM rm_pos), 5000)');
-- The backend kept its read memory for the next read, up to the limit (the
-- work's first block grew to what a read of 3000 changes takes; on
-- PostgreSQL 18 a result set's rows live in a context of their own).
SELECT name, total_bytes <= 16 * 1024 * 1024 AS within_limit,
       name <> 'changefeed read work' OR total_bytes >= 1024 * 1024 AS work_kept
  FROM pg_backend_memory_contexts WHERE name LIKE 'changefeed read%' ORDER BY name;

-- Two results alive at once in one statement.
SELECT count(*), count(DISTINCT a.position), min(b.doc_id)
  FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000) a
  JOIN changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000) b USING (seq);
-- A read per row of another: each call's result ends before the next.
SELECT count(*) FROM rm_other o,
       LATERAL (SELECT * FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), o.id * 100)) r;

-- A cursor read half-way, other reads in between, then the rest.
BEGIN;
DECLARE c CURSOR FOR SELECT seq, doc_id, current, position FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000);
FETCH 1500 FROM c \g /dev/null
SELECT count(*) FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000);
SELECT count(*) FROM changefeed.read('rm_other', (SELECT p FROM rm_pos), 5000);
CREATE TEMP TABLE rm_fetched AS SELECT 1;
MOVE ABSOLUTE 0 IN c;
FETCH ALL FROM c \g /dev/null
CLOSE c;
COMMIT;
-- A cursor held past its transaction's commit, read after it.
BEGIN;
DECLARE h CURSOR WITH HOLD FOR SELECT seq, doc_id, current, position FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000);
COMMIT;
SELECT count(*) FROM changefeed.read('rm_other', (SELECT p FROM rm_pos), 5000);
CREATE TABLE rm_held (seq bigint, doc_id text, current jsonb, position text);
DO $$
DECLARE
    r record;
    h refcursor := 'h';
BEGIN
    LOOP
        FETCH h INTO r;
        EXIT WHEN NOT FOUND;
        INSERT INTO rm_held VALUES (r.seq, r.doc_id, r.current, r.position);
    END LOOP;
END
$$;
CLOSE h;
SELECT rm_same('SELECT seq, doc_id, current, position FROM rm_held');

-- A result an error abandoned, in a subtransaction: the reads after it in the
-- same transaction are right, and so is the next transaction's.
BEGIN;
SELECT try($$SELECT 1 / (count(*) - count(*)) FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000)$$);
SELECT try($$SELECT r.seq / 0 FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000) r$$);
SELECT rm_same('SELECT seq, doc_id, current, position FROM changefeed.read(''rm_docs'', (SELECT p FROM rm_pos), 5000)');
COMMIT;
SELECT rm_same('SELECT seq, doc_id, current, position FROM changefeed.read(''rm_docs'', (SELECT p FROM rm_pos), 5000)');
-- A whole transaction that failed after a read.
BEGIN;
SELECT count(*) FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000);
SELECT 1 / 0;
ROLLBACK;
SELECT rm_same('SELECT seq, doc_id, current, position FROM changefeed.read(''rm_docs'', (SELECT p FROM rm_pos), 5000)');

-- A procedure that commits while it loops over a read (the loop's result is
-- kept past each commit).
CREATE TABLE rm_looped (seq bigint, doc_id text, current jsonb, position text);
CREATE PROCEDURE rm_loop() LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT * FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000) LOOP
        INSERT INTO rm_looped VALUES (r.seq, r.doc_id, r.current, r.position);
        IF r.seq % 500 = 0 THEN
            COMMIT;
            PERFORM count(*) FROM changefeed.read('rm_other', (SELECT p FROM rm_pos), 5000);
        END IF;
    END LOOP;
END
$$;
CALL rm_loop();
SELECT rm_same('SELECT seq, doc_id, current, position FROM rm_looped');

-- read_ranges(), whose markers come with the rows.
SELECT count(*) FILTER (WHERE seq IS NOT NULL) AS changes, count(*) FILTER (WHERE seq IS NULL) AS markers
  FROM changefeed.read_ranges('rm_docs', '{0,1,2,3}', ARRAY[(SELECT p FROM rm_pos)], 5000);
SELECT rm_same($q$SELECT seq, doc_id, current, position
                    FROM changefeed.read_ranges('rm_docs', '{0,1,2,3}', ARRAY[(SELECT p FROM rm_pos)], 5000)
                   WHERE seq IS NOT NULL$q$);

-- A read within a read: a row-level security policy whose function reads the
-- feed of another table, run for each change the outer read delivers.
CREATE ROLE regress_rm_reader LOGIN IN ROLE changefeed_reader;
CREATE FUNCTION public.rm_peek() RETURNS bool LANGUAGE sql AS $$
    SELECT count(*) = 7 FROM changefeed.read('public.rm_other', (SELECT p FROM public.rm_pos), 100)
$$;
GRANT SELECT ON rm_docs, rm_other, rm_pos TO regress_rm_reader;
CREATE POLICY rm_peeking ON rm_docs FOR SELECT USING (id % 2 = 0 AND public.rm_peek());
ALTER TABLE rm_docs ENABLE ROW LEVEL SECURITY;
SET ROLE regress_rm_reader;
SELECT count(*), count(*) FILTER (WHERE doc_id::int % 2 = 1) AS odd
  FROM changefeed.read('rm_docs', (SELECT p FROM rm_pos), 5000);
-- and the reads after it take the kept memory again.
SELECT count(*) FROM changefeed.read('rm_other', (SELECT p FROM rm_pos), 5000);
RESET ROLE;
ALTER TABLE rm_docs DISABLE ROW LEVEL SECURITY;

-- A lower limit holds from the next read on: reads of larger documents
-- grow the kept memory past it, one read after lowering it shrinks it.
CREATE TABLE rm_big (id int PRIMARY KEY, body text);
SELECT changefeed.enable('rm_big') IS NOT NULL;
CREATE TABLE rm_big_pos AS SELECT changefeed.current_position() AS p;
INSERT INTO rm_big SELECT g, repeat('y', 1000) FROM generate_series(1, 3000) g;
SELECT count(*) FROM changefeed.read('rm_big', (SELECT p FROM rm_big_pos), 5000);
SELECT count(*) FROM changefeed.read('rm_big', (SELECT p FROM rm_big_pos), 5000);
SELECT sum(total_bytes) > 2 * 1024 * 1024 AS grown
  FROM pg_backend_memory_contexts WHERE name LIKE 'changefeed read%';
SET changefeed.read_memory_kept = '1MB';
SELECT count(*) FROM changefeed.read('rm_big', (SELECT p FROM rm_big_pos), 5000);
SELECT coalesce(sum(total_bytes), 0) <= 1024 * 1024 + 128 * 1024 AS within_lower_limit
  FROM pg_backend_memory_contexts WHERE name LIKE 'changefeed read%';
RESET changefeed.read_memory_kept;
SELECT changefeed.disable('rm_big') IS NOT NULL;
DROP TABLE rm_big, rm_big_pos;
-- Lowering the limit to nothing gives the memory back at the transaction's end.
SET changefeed.read_memory_kept = 0;
SELECT rm_same('SELECT seq, doc_id, current, position FROM changefeed.read(''rm_docs'', (SELECT p FROM rm_pos), 5000)');
SELECT count(*) AS kept_contexts FROM pg_backend_memory_contexts WHERE name LIKE 'changefeed read%';
RESET changefeed.read_memory_kept;
-- Only a superuser sets it: every reading backend's memory is the server's.
SET ROLE regress_rm_reader;
SELECT try('SET changefeed.read_memory_kept = ''1GB''');
RESET ROLE;

SELECT changefeed.disable('rm_docs') IS NOT NULL, changefeed.disable('rm_other') IS NOT NULL;
DROP TABLE rm_docs, rm_other, rm_pos, rm_truth, rm_held, rm_looped;
DROP FUNCTION rm_same(text), public.rm_peek();
DROP PROCEDURE rm_loop();
DROP ROLE regress_rm_reader;
