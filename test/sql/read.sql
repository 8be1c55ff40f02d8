-- Reads: latest-version and all-versions semantics, paging, windows, ranges.
\set SHOW_CONTEXT never
CREATE TABLE items (id int PRIMARY KEY, name text, deleted bool NOT NULL DEFAULT false);
SELECT changefeed.enable('items', ranges => 4) IS NOT NULL;
SELECT start_cursor('latest');
SELECT start_cursor('all');

-- The latest-version table of the reference semantics, one situation each:
INSERT INTO items VALUES (1, 'created then replaced');
UPDATE items SET name = 'replaced' WHERE id = 1;          -- once, carrying the replace
INSERT INTO items VALUES (2, 'patched');
UPDATE items SET name = 'patched, whole row' WHERE id = 2; -- whole document
INSERT INTO items VALUES (3, 'created then hard-deleted');
DELETE FROM items WHERE id = 3;                           -- not at all
INSERT INTO items VALUES (4, 'soft-deleted');
UPDATE items SET deleted = true WHERE id = 4;             -- yes: a write like any other
SELECT operation, doc_id, current FROM next_changes('latest', 'items', 100, 'latest');
-- A hard delete of a document created before the last read: not on the latest feed.
DELETE FROM items WHERE id = 1;
SELECT operation, doc_id FROM next_changes('latest', 'items', 100, 'latest');
-- The all-versions feed carried every write, deletes included.
SELECT operation, doc_id, current ->> 'name' AS cur, previous ->> 'name' AS prev
  FROM next_changes('all', 'items');

-- Paging: a full window read two rows at a time loses and repeats nothing.
SELECT start_cursor('pages');
INSERT INTO items SELECT g, 'page ' || g FROM generate_series(100, 106) g;
SELECT string_agg(doc_id, ',' ORDER BY seq) FROM next_changes('pages', 'items', 2);
SELECT string_agg(doc_id, ',' ORDER BY seq) FROM next_changes('pages', 'items', 2);
-- A window exhausted mid-call rolls over into the next window in the same call.
INSERT INTO items VALUES (107, 'next window'), (108, 'next window');
SELECT string_agg(doc_id, ',' ORDER BY seq) FROM next_changes('pages', 'items', 10);
SELECT count(*) FROM next_changes('pages', 'items', 10);

-- Latest mode pages through the latest versions of one window.
SELECT start_cursor('latest_pages');
UPDATE items SET name = name || ' v2' WHERE id BETWEEN 100 AND 104;
UPDATE items SET name = name || ' v3' WHERE id BETWEEN 100 AND 102;
SELECT doc_id, current ->> 'name' FROM next_changes('latest_pages', 'items', 3, 'latest');
SELECT doc_id, current ->> 'name' FROM next_changes('latest_pages', 'items', 3, 'latest');

-- A clear hides what came before it on the latest feed; all versions show it.
SELECT start_cursor('clear_latest');
SELECT start_cursor('clear_all');
INSERT INTO items VALUES (200, 'before truncate');
TRUNCATE items;
INSERT INTO items VALUES (201, 'after truncate');
SELECT operation, doc_id FROM next_changes('clear_latest', 'items', 100, 'latest');
SELECT operation, count(*) FROM next_changes('clear_all', 'items') GROUP BY 1 ORDER BY 1;

-- Ranges: each range sees only its own documents; together they see everything.
SELECT start_cursor('r0'); SELECT start_cursor('r123'); SELECT start_cursor('every');
INSERT INTO items SELECT g, 'ranged' FROM generate_series(300, 339) g;
SELECT (SELECT count(*) FROM next_changes('r0', 'items', 100, 'all', '{0}'))
     + (SELECT count(*) FROM next_changes('r123', 'items', 100, 'all', '{1,2,3}')) AS split,
       (SELECT count(*) FROM next_changes('every', 'items', 100)) AS whole;
SELECT bool_and(range_id = changefeed.range_of(doc_id, 4)) FROM changefeed.read('items', (SELECT pos FROM cursor_state WHERE name = 'all'));

-- An empty read in a REPEATABLE READ transaction: the position to keep is
-- current_position() in the same transaction.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM changefeed.read('items', changefeed.current_position());
SELECT changefeed.current_position() IS NOT NULL AS have_position;
COMMIT;

-- Bad arguments.
SELECT try($$SELECT * FROM changefeed.read('items', changefeed.current_position(), 0)$$);
SELECT try($$SELECT * FROM changefeed.read('items', changefeed.current_position(), 100001)$$);
SELECT try($$SELECT * FROM changefeed.read('items', changefeed.current_position(), 10, '{4}')$$);
SELECT try($$SELECT * FROM changefeed.read('items', changefeed.current_position(), 10, '{-1}')$$);
SELECT try($$SELECT * FROM changefeed.read('items', changefeed.current_position(), 10, NULL, 'newest')$$);
SELECT try($$SELECT * FROM changefeed.read('missing_table', changefeed.current_position())$$);
-- A transaction that captured changes cannot read: it would see its own uncommitted rows.
BEGIN;
INSERT INTO items VALUES (400, 'uncommitted');
SELECT try($$SELECT * FROM changefeed.read('items', changefeed.current_position())$$);
ROLLBACK;

-- Filters run in the database, with typed variables (never spliced into the path).
CREATE TABLE tickets (id int PRIMARY KEY, status text, priority int, title text);
SELECT changefeed.enable('tickets') IS NOT NULL;
SELECT start_cursor('open'); SELECT start_cursor('urgent'); SELECT start_cursor('quoted');
SELECT start_cursor('one'); SELECT start_cursor('has_title');
INSERT INTO tickets VALUES (1, 'open', 1, 'a'), (2, 'closed', 5, NULL), (3, 'open', 9, 'it''s "quoted"');
UPDATE tickets SET status = 'closed' WHERE id = 1;
DELETE FROM tickets WHERE id = 3;
TRUNCATE tickets;
-- Deletes are tested on the previous image; clears always pass; a replace
-- that leaves the filter's view (1 closed) is a delete of the document before.
SELECT operation, doc_id, count(*) FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'open'),
       filter => '$.status == $s', filter_vars => '{"s": "open"}') GROUP BY 1, 2 ORDER BY min(seq);
-- filter_moves => false: a replace is tested on the document after alone (1 closed is not delivered).
SELECT operation, doc_id, count(*) FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'open'),
       filter => '$.status == $s', filter_vars => '{"s": "open"}', filter_moves => false) GROUP BY 1, 2 ORDER BY min(seq);
SELECT operation, doc_id FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'urgent'),
       filter => '$.priority >= $p', filter_vars => '{"p": 5}') WHERE operation <> 'clear';
SELECT operation, doc_id FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'quoted'),
       filter => '$.title == $t', filter_vars => jsonb_build_object('t', 'it''s "quoted"')) WHERE operation <> 'clear';
SELECT operation, doc_id FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'has_title'),
       filter => 'exists($.title ? (@ != null))') WHERE operation <> 'clear';
-- One document's changes; clears pass.
SELECT operation, doc_id FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'one'),
       doc_ids => '{1}') ORDER BY seq LIMIT 3;
-- The latest feed filters the latest version.
SELECT start_cursor('latest_filtered');
INSERT INTO tickets VALUES (4, 'open', 1, 'x'), (5, 'open', 1, 'y');
UPDATE tickets SET status = 'closed' WHERE id = 4;
SELECT operation, doc_id, current ->> 'status' AS status
  FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'latest_filtered'),
       mode => 'latest', filter => '$.status == "closed"');
-- A filter that is not a predicate matches nothing; a malformed one is refused.
SELECT count(*) FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'latest_filtered'),
       filter => '$.status');
SELECT try($$SELECT * FROM changefeed.read('tickets', changefeed.current_position(), filter => '$.status ==')$$);
-- Variables the filter names must be in filter_vars, an object.
SELECT try($$SELECT * FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'latest_filtered'),
       filter => '$.status == $s')$$);
SELECT try($$SELECT * FROM changefeed.read('tickets', (SELECT pos FROM cursor_state WHERE name = 'latest_filtered'),
       filter => '$.status == $s', filter_vars => '["open"]')$$);
-- A filter skips changes, not positions: the position after a row is past
-- the changes skipped before it, and the last row of a window carries the
-- window's end, past those skipped after it; a window with no match is read
-- through (a tick between the two transactions ends the first window when
-- the page is smaller than the backlog).
CREATE TABLE skipped (id int PRIMARY KEY, keep bool);
SELECT changefeed.enable('skipped') IS NOT NULL;
SELECT start_cursor('skipped');
INSERT INTO skipped SELECT g, false FROM generate_series(1, 10) g;
INSERT INTO changefeed.tick (snap_xmax, snap) SELECT pg_snapshot_xmax(s), s FROM pg_current_snapshot() s;
INSERT INTO skipped SELECT g, g IN (13, 16) FROM generate_series(11, 18) g;
CREATE TEMP TABLE skipped_read AS
SELECT 1 AS step, doc_id, "position" FROM changefeed.read('skipped', (SELECT pos FROM cursor_state WHERE name = 'skipped'),
       1, filter => '$.keep == true');
SELECT doc_id FROM skipped_read;
SELECT string_agg(doc_id, ',' ORDER BY seq) AS after_first
  FROM changefeed.read('skipped', (SELECT "position" FROM skipped_read WHERE step = 1));
INSERT INTO skipped_read
SELECT 2, doc_id, "position" FROM changefeed.read('skipped', (SELECT "position" FROM skipped_read WHERE step = 1),
       5, filter => '$.keep == true');
SELECT doc_id FROM skipped_read WHERE step = 2;
SELECT count(*) AS after_last FROM changefeed.read('skipped', (SELECT "position" FROM skipped_read WHERE step = 2));
-- Mode 'latest' with a filter pages alike.
SELECT doc_id FROM changefeed.read('skipped', (SELECT pos FROM cursor_state WHERE name = 'skipped'),
       5, mode => 'latest', filter => '$.keep == true') ORDER BY seq;
-- Without previous images a delete cannot be tested: it passes every filter.
CREATE TABLE unkept (id int PRIMARY KEY, keep bool);
SELECT changefeed.enable('unkept', keep_previous => false) IS NOT NULL;
SELECT start_cursor('unkept');
INSERT INTO unkept VALUES (1, false), (2, true);
DELETE FROM unkept;
SELECT operation, doc_id FROM changefeed.read('unkept', (SELECT pos FROM cursor_state WHERE name = 'unkept'),
       filter => '$.keep == true') ORDER BY seq;
-- An always-true filter changes nothing: a read with it returns the same changes
-- in the same pages, in either mode, across ranges, updates, a key change,
-- deletes and a clear, whatever the page size, with a range asked for twice.
CREATE TABLE both_ways (id int PRIMARY KEY, v text);
SELECT changefeed.enable('both_ways', ranges => 4) IS NOT NULL;
SELECT start_cursor('both_ways');
INSERT INTO both_ways SELECT g, 'v' || g FROM generate_series(1, 300) g;
UPDATE both_ways SET v = 'w' WHERE id % 3 = 0;
UPDATE both_ways SET id = id + 1000 WHERE id = 7;
DELETE FROM both_ways WHERE id % 5 = 0;
TRUNCATE both_ways;
INSERT INTO both_ways VALUES (1, 'again');
CREATE FUNCTION pages_of(filter jsonpath, ranges int[], page int, read_mode text DEFAULT 'all',
                         tbl regclass DEFAULT 'both_ways')
RETURNS TABLE (page_no int, seq bigint, operation text, doc_id text, event_id text)
LANGUAGE plpgsql AS $$
DECLARE
    p text := (SELECT c.pos FROM cursor_state c WHERE c.name = tbl::text);
    r record;
    got int;
BEGIN
    page_no := 0;
    LOOP
        got := 0;
        FOR r IN SELECT * FROM changefeed.read(tbl, p, page, ranges => ranges, mode => read_mode,
                                               filter => filter) LOOP
            seq := r.seq; operation := r.operation; doc_id := r.doc_id; event_id := r.event_id;
            RETURN NEXT;
            p := r.position;
            got := got + 1;
        END LOOP;
        EXIT WHEN got = 0;
        page_no := page_no + 1;
    END LOOP;
END
$$;
SELECT count(*) AS changes, count(DISTINCT seq) AS distinct_changes, max(page_no) + 1 AS pages
  FROM pages_of(NULL, NULL, 37);
SELECT count(*) AS differences FROM (
    (SELECT * FROM pages_of(NULL, NULL, 37) EXCEPT ALL SELECT * FROM pages_of('true', NULL, 37))
    UNION ALL
    (SELECT * FROM pages_of('true', NULL, 37) EXCEPT ALL SELECT * FROM pages_of(NULL, NULL, 37))) d;
SELECT count(*) AS differences, (SELECT count(*) FROM pages_of(NULL, '{2,0,2}', 11)) AS changes FROM (
    (SELECT * FROM pages_of(NULL, '{2,0,2}', 11) EXCEPT ALL SELECT * FROM pages_of('true', '{2,0,2}', 11))
    UNION ALL
    (SELECT * FROM pages_of('true', '{2,0,2}', 11) EXCEPT ALL SELECT * FROM pages_of(NULL, '{2,0,2}', 11))) d;
SELECT count(*) AS one_document FROM changefeed.read('both_ways', (SELECT pos FROM cursor_state WHERE name = 'both_ways'),
       1000, doc_ids => '{7,1007}');
-- The latest versions: a clear ends what came before it in its range.
CREATE TABLE both_latest (id int PRIMARY KEY, v text);
SELECT changefeed.enable('both_latest', ranges => 4) IS NOT NULL;
SELECT start_cursor('both_latest');
INSERT INTO both_latest SELECT g, 'v' || g FROM generate_series(1, 200) g;
UPDATE both_latest SET v = 'w' WHERE id % 3 = 0;
TRUNCATE both_latest;
INSERT INTO both_latest SELECT g, 'again ' || g FROM generate_series(1, 50) g;
UPDATE both_latest SET v = 'last' WHERE id <= 10;
UPDATE both_latest SET id = 1000 WHERE id = 7;
DELETE FROM both_latest WHERE id = 5;
-- Windows end at the notifier's ticks, which come when they come: the two
-- ways are compared in one snapshot, so that they see the same ticks.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) > 0 AS some FROM pages_of(NULL, NULL, 6, 'latest', 'both_latest');
SELECT count(*) AS differences FROM (
    (SELECT * FROM pages_of(NULL, NULL, 6, 'latest', 'both_latest')
     EXCEPT ALL SELECT * FROM pages_of('true', NULL, 6, 'latest', 'both_latest'))
    UNION ALL
    (SELECT * FROM pages_of('true', NULL, 6, 'latest', 'both_latest')
     EXCEPT ALL SELECT * FROM pages_of(NULL, NULL, 6, 'latest', 'both_latest'))) d;
SELECT count(*) AS differences FROM (
    (SELECT * FROM pages_of(NULL, '{3,1,3}', 2, 'latest', 'both_latest')
     EXCEPT ALL SELECT * FROM pages_of('true', '{3,1,3}', 2, 'latest', 'both_latest'))
    UNION ALL
    (SELECT * FROM pages_of('true', '{3,1,3}', 2, 'latest', 'both_latest')
     EXCEPT ALL SELECT * FROM pages_of(NULL, '{3,1,3}', 2, 'latest', 'both_latest'))) d;
COMMIT;
