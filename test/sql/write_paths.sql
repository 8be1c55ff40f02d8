-- Write paths that newer PostgreSQL majors add, each captured like a plain
-- INSERT/UPDATE/DELETE.  Sections for a newer server are skipped on an older
-- one (expected/write_paths_1.out: 17, expected/write_paths_2.out: 15 and 16).
\set SHOW_CONTEXT never
SELECT current_setting('server_version_num')::int >= 170000 AS pg17,
       current_setting('server_version_num')::int >= 180000 AS pg18 \gset
CREATE TABLE wp (id int PRIMARY KEY, note text);
SELECT changefeed.enable('wp') IS NOT NULL AS enabled;
CREATE TABLE wp_src (id int PRIMARY KEY, note text);
SELECT start_cursor('wp_replay');
INSERT INTO wp VALUES (1, 'one'), (2, 'two'), (3, 'three');
INSERT INTO wp_src VALUES (2, 'two from src'), (4, 'four from src');
SELECT start_cursor('wp');

-- MERGE (15 and newer): each action fires the row trigger.
MERGE INTO wp t USING wp_src s ON t.id = s.id
  WHEN MATCHED THEN UPDATE SET note = s.note
  WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.note);
MERGE INTO wp t USING (VALUES (3)) s(id) ON t.id = s.id
  WHEN MATCHED THEN DELETE;
SELECT operation, doc_id, current ->> 'note' AS note, previous ->> 'note' AS prev FROM next_changes('wp', 'wp');

\if :pg17
-- 17: MERGE ... RETURNING, and WHEN NOT MATCHED BY SOURCE.
MERGE INTO wp t USING (VALUES (1, 'one merged'), (5, 'five')) s(id, note) ON t.id = s.id
  WHEN MATCHED THEN UPDATE SET note = s.note
  WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.note)
  RETURNING merge_action(), t.id;
MERGE INTO wp t USING (SELECT id FROM wp_src) s ON t.id = s.id
  WHEN NOT MATCHED BY SOURCE AND t.id = 1 THEN DELETE
  RETURNING merge_action(), t.id;
WITH m AS (
  MERGE INTO wp t USING (VALUES (6, 'six')) s(id, note) ON t.id = s.id
    WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.note)
    RETURNING t.id)
SELECT count(*) AS merged_in_cte FROM m;
SELECT operation, doc_id, current ->> 'note' AS note, previous ->> 'note' AS prev FROM next_changes('wp', 'wp');

-- 17: SET EXPRESSION rewrites a stored generated column's values without a
-- row trigger firing: refused on an enabled table (also beside another
-- subcommand, and on an enabled partitioned table); DROP EXPRESSION keeps the
-- values and passes.
CREATE TABLE wp_expr (id int PRIMARY KEY, a int, twice int GENERATED ALWAYS AS (a * 2) STORED);
SELECT changefeed.enable('wp_expr') IS NOT NULL AS enabled;
SELECT start_cursor('wp_expr');
INSERT INTO wp_expr (id, a) VALUES (1, 10);
ALTER TABLE wp_expr ALTER COLUMN twice SET EXPRESSION AS (a * 3);
SELECT try($$ALTER TABLE wp_expr ADD COLUMN extra text, ALTER COLUMN twice SET EXPRESSION AS (a * 3)$$);
SELECT id, a, twice FROM wp_expr;
ALTER TABLE wp_expr ALTER COLUMN twice DROP EXPRESSION;
UPDATE wp_expr SET a = 11;
SELECT operation, doc_id, current FROM next_changes('wp_expr', 'wp_expr');
SELECT changefeed.disable('wp_expr');
DROP TABLE wp_expr;
CREATE TABLE wp_expr_p (id int PRIMARY KEY, a int, twice int GENERATED ALWAYS AS (a * 2) STORED)
  PARTITION BY RANGE (id);
CREATE TABLE wp_expr_p1 PARTITION OF wp_expr_p FOR VALUES FROM (0) TO (100);
SELECT changefeed.enable('wp_expr_p') IS NOT NULL AS enabled;
SELECT try($$ALTER TABLE wp_expr_p ALTER COLUMN twice SET EXPRESSION AS (a * 3)$$);
SELECT changefeed.disable('wp_expr_p');
DROP TABLE wp_expr_p;
\else
\echo 'MERGE ... RETURNING, SET EXPRESSION: need PostgreSQL 17'
\endif

\if :pg18
-- 18: RETURNING OLD and NEW on UPDATE, DELETE and MERGE.
UPDATE wp SET note = 'two updated' WHERE id = 2 RETURNING old.note AS old_note, new.note AS new_note;
DELETE FROM wp WHERE id = 4 RETURNING old.id, new.id IS NULL AS new_is_null;
MERGE INTO wp t USING (VALUES (5, 'five merged'), (7, 'seven')) s(id, note) ON t.id = s.id
  WHEN MATCHED THEN UPDATE SET note = s.note
  WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.note)
  RETURNING merge_action(), old.note AS old_note, new.note AS new_note;
INSERT INTO wp VALUES (6, 'six again') ON CONFLICT (id) DO UPDATE SET note = excluded.note
  RETURNING old.note AS old_note, new.note AS new_note;
SELECT operation, doc_id, current ->> 'note' AS note, previous ->> 'note' AS prev FROM next_changes('wp', 'wp');

-- 18: a virtual generated column is computed when read, so a row trigger
-- sees it as null: enable() refuses a table that has one (also in a
-- partition), the guard an ALTER TABLE that adds one; a stored one is captured.
CREATE TABLE wp_virt (id int PRIMARY KEY, a int, thrice int GENERATED ALWAYS AS (a * 3) VIRTUAL);
SELECT changefeed.enable('wp_virt');
CREATE TABLE wp_virt_p (id int PRIMARY KEY, a int, thrice int GENERATED ALWAYS AS (a * 3) VIRTUAL)
  PARTITION BY RANGE (id);
CREATE TABLE wp_virt_p1 PARTITION OF wp_virt_p FOR VALUES FROM (0) TO (100);
SELECT changefeed.enable('wp_virt_p');
DROP TABLE wp_virt, wp_virt_p;
CREATE TABLE wp_gen (id int PRIMARY KEY, a int, stored_twice int GENERATED ALWAYS AS (a * 2) STORED);
SELECT changefeed.enable('wp_gen') IS NOT NULL AS enabled;
SELECT start_cursor('wp_gen');
INSERT INTO wp_gen (id, a) VALUES (1, 10);
SELECT try($$ALTER TABLE wp_gen ADD COLUMN virtual_thrice int GENERATED ALWAYS AS (a * 3) VIRTUAL$$);
SELECT count(*) AS virtual_columns FROM pg_attribute WHERE attrelid = 'wp_gen'::regclass AND attgenerated = 'v';
UPDATE wp_gen SET a = 12;
SELECT operation, doc_id, current FROM next_changes('wp_gen', 'wp_gen');
SELECT table_name, intact FROM changefeed.verify() WHERE table_name = 'wp_gen'::regclass;
SELECT changefeed.disable('wp_gen');
DROP TABLE wp_gen;
\else
\echo 'RETURNING OLD/NEW: needs PostgreSQL 18'
\endif

-- Replaying the whole feed gives the table's contents: no write was missed.
WITH changes AS (SELECT * FROM next_changes('wp_replay', 'wp', 1000)),
     last AS (SELECT DISTINCT ON (doc_id) * FROM changes ORDER BY doc_id, seq DESC),
     replayed AS (SELECT (current ->> 'id')::int AS id, current ->> 'note' AS note FROM last
                   WHERE operation <> 'delete')
SELECT (SELECT count(*) FROM changes) AS changes,
       (SELECT string_agg(id || '=' || note, ', ' ORDER BY id) FROM wp) AS table_contents,
       (SELECT string_agg(id || '=' || note, ', ' ORDER BY id) FROM wp)
         IS NOT DISTINCT FROM (SELECT string_agg(id || '=' || note, ', ' ORDER BY id) FROM replayed) AS feed_matches;
SELECT changefeed.disable('wp');
DROP TABLE wp, wp_src;
