-- Positions are opaque, versioned and validated: never a silent restart.
\set SHOW_CONTEXT never
CREATE TABLE pos_t (id int PRIMARY KEY);
SELECT changefeed.enable('pos_t') IS NOT NULL;
SELECT left(changefeed.current_position(), 4) AS prefix;
-- The lower snapshot of a fresh position is the statement's snapshot.
SELECT (changefeed.position_decode(changefeed.current_position())).lo::text = pg_current_snapshot()::text AS same_snapshot;
SELECT (changefeed.position_decode(changefeed.current_position())).hi IS NULL AS no_window;

-- Malformed, truncated, tampered, unknown version, null, foreign.
SELECT try($$SELECT * FROM changefeed.read('pos_t', 'not a position')$$);
SELECT try($$SELECT * FROM changefeed.read('pos_t', '')$$);
SELECT try($$SELECT * FROM changefeed.read('pos_t', 'cf1.@@@@')$$);
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t', left(changefeed.current_position(), 30)));
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t',
       overlay(changefeed.current_position() placing (CASE WHEN substr(changefeed.current_position(), 20, 1) = 'A' THEN 'B' ELSE 'A' END) from 20 for 1)));
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t', 'cf9.' || substr(changefeed.current_position(), 5)));
SELECT try($$SELECT * FROM changefeed.read('pos_t', NULL)$$);
-- Taken on another cluster: well formed, refused.
SELECT try($$SELECT * FROM changefeed.read('pos_t', 'cf1.AZz-Y2ndmwxrBQAAAO4CAAAAAAAA7gIAAAAAAAAAAAAAAAAAAAAAAAAAll6w9w')$$);
-- The full message with its hint.
SELECT * FROM changefeed.read('pos_t', 'cf1.AZz-Y2ndmwxrBQAAAO4CAAAAAAAA7gIAAAAAAAAAAAAAAAAAAAAAAAAAll6w9w');
SELECT * FROM changefeed.read('pos_t', 'garbage');
