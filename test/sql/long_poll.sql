-- read_ranges(..., wait): a long poll woken by commits (preloaded only).
\set SHOW_CONTEXT never
CREATE TABLE polled (id int PRIMARY KEY, v text);
SELECT changefeed.enable('polled', ranges => 4) IS NOT NULL;
SELECT changefeed.current_position() AS p \gset

-- Bad waits: negative, beyond 60 s (a day counts as one).
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '-1 ms')$$, :'p'));
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '61s')$$, :'p'));
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '1 day -86300 s')$$, :'p'));
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '1 mon')$$, :'p'));

-- Where a wait would hold back vacuum: refused before anything is read.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '1s')$$, :'p'));
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '1s')$$, :'p'));
ROLLBACK;
BEGIN;
CREATE TEMP TABLE scratch (x int);
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '1s')$$, :'p'));
ROLLBACK;
BEGIN;
DECLARE open_cursor CURSOR FOR SELECT 1;
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '1s')$$, :'p'));
ROLLBACK;
-- A transaction that captured changes: CF009 (its own changes), as without wait.
BEGIN;
INSERT INTO polled VALUES (0, 'own');
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '1s')$$, :'p'));
ROLLBACK;
-- The other checks of read_ranges() come first, wait or not.
SELECT * FROM changefeed.read_ranges('polled', '{0,9}', ARRAY[:'p'], wait => '1s');
-- The statement's snapshot is left to vacuum while the read waits, so the
-- statement must be the read alone: refused before anything is read when it
-- joins a table, filters by a subquery or a non-immutable function, reads in
-- a writable CTE, or is called from inside a function (whose caller's
-- snapshot outlives it).  Ordering, limits, aggregates, filters on its own
-- columns and subqueries in its arguments (run before the call) are alone.
SELECT r.seq FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '1s') r
  JOIN polled ON polled.id::text = r.doc_id;
SELECT seq FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '1s')
 WHERE doc_id IN (SELECT v FROM polled);
SELECT seq FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '1s')
 WHERE doc_id = (SELECT max(v) FROM polled);
CREATE FUNCTION polled_count() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT count(*) FROM polled';
SELECT seq, polled_count() FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '1s');
DROP FUNCTION polled_count();
SELECT seq, random() FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '1s');
SELECT seq, query_to_xml('SELECT * FROM polled', true, true, '')
  FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '1s');
SELECT changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '1s');
WITH r AS (SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '1s'))
SELECT count(*) FROM r, polled;
SELECT count(*) FROM ROWS FROM (changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '1s'),
                                generate_series(1, 2));
SELECT try(format($$SELECT * FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[%L], wait => '1s')$$, :'p'));
CREATE FUNCTION poll_in_sql(p text) RETURNS SETOF bigint LANGUAGE sql VOLATILE AS $$
    SELECT seq FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[p], wait => '1s');
    SELECT 1::bigint;
$$;
SELECT * FROM poll_in_sql(:'p');
DROP FUNCTION poll_in_sql(text);
SELECT count(*) FILTER (WHERE seq IS NULL) AS markers
  FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY(SELECT :'p' FROM pg_database WHERE datname = current_database()),
                                       wait => '10ms');
SELECT seq, resume_ranges, written_at::text, extract(epoch FROM written_at), current::text
  FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '10ms')
 WHERE seq IS NULL ORDER BY resume_ranges LIMIT 1;

-- Nothing commits: after the wait, one marker, every range resuming at the
-- read's own snapshot (a position that reads nothing yet).
SELECT seq, resume_ranges, "position" IS NOT NULL AS has_position
  FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '200ms');
SELECT seq, resume_ranges FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '0');
SELECT seq, resume_ranges FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => NULL);

-- Rows there already: returned at once, as without wait.
INSERT INTO polled VALUES (1, 'a'), (2, 'b');
SELECT operation, doc_id, resume_ranges FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '30s')
 ORDER BY seq NULLS LAST;
-- The same in an explicit READ COMMITTED transaction block.
BEGIN;
SELECT count(*) FILTER (WHERE seq IS NOT NULL) AS changes
  FROM changefeed.read_ranges('polled', '{0,1,2,3}', ARRAY[:'p'], wait => '30s');
COMMIT;

DROP TABLE polled;
