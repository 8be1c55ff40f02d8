-- images => 'keys': the log holds keys, operations and positions alone; the
-- latest-version feed reads the current rows from the table at read time,
-- the all-versions feed is refused (CF021).
\set SHOW_CONTEXT never
CREATE FUNCTION ik_log(tbl regclass) RETURNS TABLE (op "char", doc_id text, has_current bool, has_previous bool)
LANGUAGE sql AS $$
    SELECT l.op, l.doc_id, l.current IS NOT NULL, l.previous IS NOT NULL
      FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id
     WHERE c.relid = tbl ORDER BY l.seq
$$;
CREATE TABLE ik_docs (id int PRIMARY KEY, status text NOT NULL, n int);
CREATE TABLE ik_parted (id int PRIMARY KEY) PARTITION BY RANGE (id);

-- Bad values, and what contradicts logging keys alone.
SELECT try($$SELECT changefeed.enable('ik_docs', images => 'none')$$);
SELECT try($$SELECT changefeed.enable('ik_docs', images => NULL)$$);
SELECT try($$SELECT changefeed.enable('ik_docs', images => 'keys')$$);
SELECT try($$SELECT changefeed.enable('ik_parted', images => 'keys', keep_previous => false)$$);

SELECT changefeed.enable('ik_docs', images => 'keys', keep_previous => false, ranges => 2) IS NOT NULL;
SELECT changefeed.enable('ik_docs', images => 'keys', keep_previous => false, ranges => 2) IS NOT NULL;  -- same: no-op
SELECT try($$SELECT changefeed.enable('ik_docs', keep_previous => false, ranges => 2)$$);               -- other images
SELECT images, keep_previous FROM changefeed.collections WHERE table_name = 'ik_docs'::regclass;
SELECT intact, problems FROM changefeed.verify() v WHERE v.table_name = 'ik_docs'::regclass;

-- Capture writes no images: keys, operations, positions.
SELECT start_cursor('ik');
INSERT INTO cursor_state SELECT 'ik_first', pos FROM cursor_state WHERE name = 'ik';
INSERT INTO ik_docs VALUES (1, 'open', 1), (2, 'open', 1), (3, 'open', 1);
UPDATE ik_docs SET n = 2 WHERE id = 2;
UPDATE ik_docs SET n = 3, status = 'closed' WHERE id = 2;   -- updated twice
DELETE FROM ik_docs WHERE id = 3;
UPDATE ik_docs SET id = 4 WHERE id = 1;                      -- a new key: delete 1, create 4
SELECT * FROM ik_log('ik_docs');

-- The all-versions feed is refused, in read() (mode 'all' is its default) and read_ranges().
SELECT try($$SELECT * FROM changefeed.read('ik_docs', changefeed.current_position())$$);
SELECT try($$SELECT * FROM changefeed.read_ranges('ik_docs', ARRAY[0, 1],
                                                   ARRAY[changefeed.current_position(), changefeed.current_position()])$$);

-- The latest-version feed: each document as it is now; the deleted ones
-- (3, and 1 under its old key) are not delivered.
SELECT operation, doc_id, current, previous FROM next_changes('ik', 'ik_docs', 100, 'latest') ORDER BY doc_id;
-- Nothing more.
SELECT count(*) FROM next_changes('ik', 'ik_docs', 100, 'latest');
-- read_ranges() alike, each range from the first position.
SELECT r.operation, r.doc_id, r.current, r.previous FROM (SELECT pos AS p FROM cursor_state WHERE name = 'ik_first') s,
       LATERAL changefeed.read_ranges('ik_docs', ARRAY[0, 1], ARRAY[s.p, s.p], 100, 'latest') r
 WHERE r.seq IS NOT NULL ORDER BY r.doc_id;

-- The row is read when the feed is: the same change read again after a
-- later write carries the later document.
SELECT start_cursor('ik_late');
UPDATE ik_docs SET n = 10 WHERE id = 4;
SELECT pos AS late_pos FROM cursor_state WHERE name = 'ik_late' \gset
SELECT operation, doc_id, current->>'n' AS n FROM changefeed.read('ik_docs', :'late_pos', mode => 'latest');
UPDATE ik_docs SET n = 11 WHERE id = 4;
SELECT operation, doc_id, current->>'n' AS n FROM changefeed.read('ik_docs', :'late_pos', mode => 'latest');

-- A filter tests the document as it is now: 5 was open when it was
-- created and is closed now, 6 the other way round.
SELECT start_cursor('ik_f');
INSERT INTO ik_docs VALUES (5, 'open', 1), (6, 'closed', 1);
UPDATE ik_docs SET status = 'closed' WHERE id = 5;
UPDATE ik_docs SET status = 'open' WHERE id = 6;
SELECT pos AS f_pos FROM cursor_state WHERE name = 'ik_f' \gset
SELECT operation, doc_id, current->>'status' AS status
  FROM changefeed.read('ik_docs', :'f_pos', mode => 'latest', filter => '$.status == $s', filter_vars => '{"s": "open"}');
SELECT doc_id FROM changefeed.read('ik_docs', :'f_pos', mode => 'latest', doc_ids => ARRAY['5']);

-- A composite key goes back into the index as its parts.
CREATE TABLE ik_pairs (a int, b text, v int, PRIMARY KEY (a, b));
SELECT changefeed.enable('ik_pairs', images => 'keys', keep_previous => false, ranges => 1) IS NOT NULL;
SELECT start_cursor('ik_p');
INSERT INTO ik_pairs VALUES (1, 'x', 1), (1, 'y "quoted"', 2), (2, 'x', 3);
DELETE FROM ik_pairs WHERE a = 2;
SELECT operation, doc_id, current FROM next_changes('ik_p', 'ik_pairs', 100, 'latest') ORDER BY doc_id;

-- Rights: the rows are read as a SELECT by the reader would read them.
CREATE ROLE regress_ik_reader IN ROLE changefeed_reader;
CREATE ROLE regress_ik_nosel IN ROLE changefeed_reader;
GRANT SELECT ON ik_docs TO regress_ik_reader;
GRANT SELECT (id) ON ik_docs TO regress_ik_nosel;   -- a column is not the whole row
SELECT pos AS f_pos FROM cursor_state WHERE name = 'ik_f' \gset
SET ROLE regress_ik_nosel;
SELECT try(format($$SELECT * FROM changefeed.read('ik_docs', %L, mode => 'latest')$$, :'f_pos'));
RESET ROLE;
SET ROLE regress_ik_reader;
SELECT doc_id, current->>'status' AS status FROM changefeed.read('ik_docs', :'f_pos', mode => 'latest') ORDER BY doc_id;
RESET ROLE;
-- Policies that apply to the reader are not bypassed: refused, even for the
-- owner when they are forced.
ALTER TABLE ik_docs ENABLE ROW LEVEL SECURITY;
SET ROLE regress_ik_reader;
SELECT try(format($$SELECT * FROM changefeed.read('ik_docs', %L, mode => 'latest')$$, :'f_pos'));
RESET ROLE;
ALTER TABLE ik_docs OWNER TO regress_ik_reader;
ALTER TABLE ik_docs FORCE ROW LEVEL SECURITY;
SET ROLE regress_ik_reader;
SELECT try(format($$SELECT * FROM changefeed.read('ik_docs', %L, mode => 'latest')$$, :'f_pos'));
RESET ROLE;
ALTER TABLE ik_docs NO FORCE ROW LEVEL SECURITY;
ALTER TABLE ik_docs DISABLE ROW LEVEL SECURITY;
ALTER TABLE ik_docs OWNER TO CURRENT_USER;

-- alter(): keys -> full logs images from then on.  An all-versions read that
-- meets a change logged without them is refused; past them it reads.
SELECT try($$SELECT changefeed.alter('ik_docs', keep_previous => true)$$);   -- still keys
SELECT start_cursor('ik_switch');
UPDATE ik_docs SET n = 20 WHERE id = 4;
SELECT changefeed.alter('ik_docs', images => 'full', keep_previous => true);
SELECT start_cursor('ik_full');
UPDATE ik_docs SET n = 21 WHERE id = 4;
SELECT * FROM ik_log('ik_docs') OFFSET 14;
SELECT pos AS switch_pos FROM cursor_state WHERE name = 'ik_switch' \gset
SELECT try(format($$SELECT * FROM changefeed.read('ik_docs', %L)$$, :'switch_pos'));
-- A filter does not skip it for want of the image it lacks.
SELECT try(format($$SELECT * FROM changefeed.read('ik_docs', %L, filter => '$.n > 0')$$, :'switch_pos'));
-- A reader bound by a policy is not told which document (it may be one the
-- policy hides), and the refusal does not depend on the documents it names:
-- doc_ids is no oracle.
GRANT SELECT ON ik_docs TO regress_ik_reader;
CREATE POLICY ik_not_4 ON ik_docs FOR SELECT TO regress_ik_reader USING (id <> 4);
ALTER TABLE ik_docs ENABLE ROW LEVEL SECURITY;
SET ROLE regress_ik_reader;
SELECT try(format($$SELECT * FROM changefeed.read('ik_docs', %L, doc_ids => '{4}')$$, :'switch_pos'));
SELECT try(format($$SELECT * FROM changefeed.read('ik_docs', %L, doc_ids => '{no such}')$$, :'switch_pos'));
RESET ROLE;
ALTER TABLE ik_docs DISABLE ROW LEVEL SECURITY;
DROP POLICY ik_not_4 ON ik_docs;
-- lag() of a processor meets the change without images: it counts as the
-- latest-version feed delivers, not refused.
SELECT changefeed.lease_init('ik_docs', 'ik_lagger', start_position => :'switch_pos');
SELECT sum(pending) > 0 AS pending, bool_or(history_lost) AS lost FROM changefeed.lag('ik_docs', 'ik_lagger');
SELECT operation, doc_id, current->>'n' AS n, previous->>'n' AS previous_n FROM next_changes('ik_full', 'ik_docs');
-- In mode 'latest' the change without images is read from the table.
DELETE FROM ik_docs WHERE id = 6;
SELECT operation, doc_id, current->>'n' AS n FROM changefeed.read('ik_docs', :'switch_pos', mode => 'latest') ORDER BY doc_id;

-- full -> keys needs keep_previous => false; then every change, those
-- logged with images too, is read from the table in mode 'latest'.
SELECT try($$SELECT changefeed.alter('ik_docs', images => 'keys')$$);
SELECT start_cursor('ik_back');
UPDATE ik_docs SET n = 22 WHERE id = 4;                       -- logged with images
SELECT changefeed.alter('ik_docs', images => 'keys', keep_previous => false);
UPDATE ik_docs SET n = 23 WHERE id = 2;                       -- keys alone
SELECT images, keep_previous FROM changefeed.collections WHERE table_name = 'ik_docs'::regclass;
SELECT try($$SELECT * FROM changefeed.read('ik_docs', changefeed.current_position())$$);
UPDATE ik_docs SET n = 24 WHERE id = 4;                       -- after the read's position, before the read
SELECT operation, doc_id, current->>'n' AS n, previous FROM next_changes('ik_back', 'ik_docs', 100, 'latest') ORDER BY doc_id;
SELECT * FROM ik_log('ik_docs') OFFSET 16;

SELECT changefeed.disable('ik_docs', forget => true), changefeed.disable('ik_pairs', forget => true);
DROP TABLE ik_docs, ik_pairs, ik_parted;
DROP ROLE regress_ik_reader, regress_ik_nosel;
DROP FUNCTION ik_log(regclass);
