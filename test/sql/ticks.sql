-- A backlog larger than a read's threshold is read in windows bounded by the
-- notifier's ticks, and still delivers every change once, in order.
\set SHOW_CONTEXT never
ALTER SYSTEM SET changefeed.tick_rows = 1000;
SELECT pg_reload_conf();
SELECT pg_sleep(0.2);
CREATE TABLE backlog (id int PRIMARY KEY, v int);
SELECT changefeed.enable('backlog', ranges => 4) IS NOT NULL;
SELECT start_cursor('backlog');
SELECT count(*) AS ticks_before FROM changefeed.tick \gset
-- 30 transactions of 1000 rows, then updates of a third of them.
DO $$
BEGIN
    FOR t IN 0..29 LOOP
        INSERT INTO backlog SELECT g, 0 FROM generate_series(t * 1000 + 1, t * 1000 + 1000) g;
        COMMIT;
    END LOOP;
    UPDATE backlog SET v = 1 WHERE id % 3 = 0;
END
$$;
-- Wait for the worker's ticks.
DO $$
BEGIN
    FOR i IN 1..200 LOOP
        EXIT WHEN (SELECT count(*) FROM changefeed.tick) >= 20;
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;
SELECT count(*) - :ticks_before >= 20 AS ticked FROM changefeed.tick;
CREATE TABLE got (seq bigint, doc_id int, v int, page int);
-- Page through: 4500 changes per read.  The first page ends inside a window
-- bounded by a tick, not by "now".
INSERT INTO got SELECT seq, doc_id::int, (current ->> 'v')::int, 1 FROM next_changes('backlog', 'backlog', 4500);
SELECT (changefeed.position_decode(pos)).hi::text IN (SELECT snap::text FROM changefeed.tick) AS tick_window
  FROM cursor_state WHERE name = 'backlog';
DO $$
DECLARE
    page int := 1;
    n int;
BEGIN
    LOOP
        page := page + 1;
        INSERT INTO got SELECT seq, doc_id::int, (current ->> 'v')::int, page
          FROM next_changes('backlog', 'backlog', 4500);
        GET DIAGNOSTICS n = ROW_COUNT;
        EXIT WHEN n = 0 OR page > 100;
    END LOOP;
END
$$;
SELECT count(*) AS changes, count(DISTINCT (doc_id, v)) AS distinct_versions, max(page) > 5 AS paged FROM got;
-- Per document, the update came after the create.
SELECT count(*) AS misordered FROM got a JOIN got b ON a.doc_id = b.doc_id AND a.v = 0 AND b.v = 1 WHERE a.seq > b.seq;
SELECT count(*) AS missing FROM backlog b WHERE NOT EXISTS (SELECT 1 FROM got g WHERE g.doc_id = b.id AND g.v = b.v);
ALTER SYSTEM RESET changefeed.tick_rows;
SELECT pg_reload_conf();
