-- as_of(tbl, pos): the table's rows as they were at a position; diff(tbl, p1,
-- p2): the net change per document between two.  Checked against copies of
-- the table taken with each position, over a random history; then what
-- cannot be rebuilt (CF025), positions in the wrong order (22023) or newer
-- than the snapshot (CF026, in specs/as_of_snapshot.spec), and readers who
-- see part of the table.
\set SHOW_CONTEXT never
CREATE TABLE ao_docs (id int PRIMARY KEY, v text, n numeric, at timestamptz);
SELECT changefeed.enable('ao_docs', ranges => 4) IS NOT NULL AS enabled;
CREATE TABLE ao_pair (a text, b int, v int, PRIMARY KEY (a, b));
SELECT changefeed.enable('ao_pair', ranges => 2) IS NOT NULL AS enabled;
SET TimeZone = 'UTC';

-- Each round: random inserts, updates (some twice in one transaction) and
-- deletes, committed, then a position and a copy of both tables taken
-- together.
CREATE TABLE ao_rounds (round int PRIMARY KEY, pos text, docs jsonb, pairs jsonb);
CREATE PROCEDURE ao_history(rounds int) LANGUAGE plpgsql AS $$
DECLARE
    k int;
BEGIN
    PERFORM setseed(0.42);
    FOR r IN 1 .. rounds LOOP
        FOR i IN 1 .. 1 + (random() * 6)::int LOOP
            k := (random() * 30)::int;
            CASE (random() * 4)::int
                WHEN 0 THEN
                    INSERT INTO ao_docs VALUES (k, 'v' || r, r * 1.5, '2026-01-01'::timestamptz + r * interval '1 hour')
                        ON CONFLICT (id) DO UPDATE SET v = excluded.v;
                WHEN 1 THEN
                    UPDATE ao_docs SET v = v || '+', n = n + 1 WHERE id = k;
                    UPDATE ao_docs SET at = at + interval '1 day' WHERE id = k;
                WHEN 2 THEN
                    DELETE FROM ao_docs WHERE id = k;
                ELSE
                    INSERT INTO ao_pair VALUES ('k' || (k % 5), k % 3, r)
                        ON CONFLICT (a, b) DO UPDATE SET v = excluded.v;
                    DELETE FROM ao_pair WHERE a = 'k' || ((k + 1) % 5) AND v < r - 3;
            END CASE;
        END LOOP;
        COMMIT;
        INSERT INTO ao_rounds
        SELECT r, changefeed.current_position(),
               (SELECT coalesce(jsonb_object_agg(changefeed.canonical_text(d.id), to_jsonb(d)), '{}') FROM ao_docs d),
               (SELECT coalesce(jsonb_object_agg('[' || to_json(p.a) || ',' || to_json(p.b::text) || ']', to_jsonb(p)), '{}')
                  FROM ao_pair p);
        COMMIT;
    END LOOP;
END
$$;
CALL ao_history(40);

-- as_of() of every round's position equals that round's copy.
SELECT count(*) AS rounds,
       count(*) FILTER (WHERE (SELECT coalesce(jsonb_object_agg(a.doc_id, a.document), '{}')
                                 FROM changefeed.as_of('ao_docs', r.pos) a) = r.docs) AS docs_equal,
       count(*) FILTER (WHERE (SELECT coalesce(jsonb_object_agg(a.doc_id, a.document), '{}')
                                 FROM changefeed.as_of('ao_pair', r.pos) a) = r.pairs) AS pairs_equal
  FROM ao_rounds r;
-- The copies differ: the check could fail.
SELECT count(DISTINCT docs) > 20 AS histories_differ FROM ao_rounds;

-- diff() between any two rounds turns the earlier copy into the later one,
-- and names only documents that differ.
CREATE FUNCTION ao_apply(docs jsonb, tbl regclass, p1 text, p2 text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT coalesce(jsonb_object_agg(k, v), '{}') FROM (
        SELECT k, v FROM jsonb_each(docs) e(k, v)
         WHERE k NOT IN (SELECT doc_id FROM changefeed.diff(tbl, p1, p2))
        UNION ALL
        SELECT doc_id, current FROM changefeed.diff(tbl, p1, p2) WHERE operation <> 'delete') x
$$;
SELECT count(*) AS pairs_of_rounds,
       count(*) FILTER (WHERE ao_apply(a.docs, 'ao_docs', a.pos, b.pos) = b.docs) AS docs_equal,
       count(*) FILTER (WHERE ao_apply(a.pairs, 'ao_pair', a.pos, b.pos) = b.pairs) AS pairs_equal,
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM changefeed.diff('ao_docs', a.pos, b.pos) d
                                       WHERE a.docs -> d.doc_id IS NOT DISTINCT FROM b.docs -> d.doc_id
                                          OR d.previous IS DISTINCT FROM a.docs -> d.doc_id)) AS wrong_rows
  FROM ao_rounds a JOIN ao_rounds b ON b.round >= a.round AND (a.round * 7 + b.round) % 5 = 0;

-- One document through create, replaces and delete: net effects.
SELECT changefeed.current_position() AS p0 \gset
INSERT INTO ao_docs VALUES (100, 'a', 1, '2026-01-01');
SELECT changefeed.current_position() AS p1 \gset
UPDATE ao_docs SET v = 'b' WHERE id = 100;
UPDATE ao_docs SET v = 'a' WHERE id = 100;
SELECT changefeed.current_position() AS p2 \gset
DELETE FROM ao_docs WHERE id = 100;
SELECT changefeed.current_position() AS p3 \gset
SELECT doc_id, operation, current ->> 'v' AS now, previous ->> 'v' AS before, cardinality(event_ids) AS changes
  FROM changefeed.diff('ao_docs', :'p0', :'p1');
-- Changed and changed back: no net change.
SELECT count(*) FROM changefeed.diff('ao_docs', :'p1', :'p2');
SELECT doc_id, operation, current, previous ->> 'v' AS before, cardinality(event_ids) AS changes
  FROM changefeed.diff('ao_docs', :'p1', :'p3');
-- Created and deleted between: nothing.
SELECT count(*) FROM changefeed.diff('ao_docs', :'p0', :'p3');
SELECT document ->> 'v' AS v FROM changefeed.as_of('ao_docs', :'p2') WHERE doc_id = '100';
SELECT count(*) FROM changefeed.as_of('ao_docs', :'p3') WHERE doc_id = '100';

-- Bad arguments, each its own code.
SELECT try($$SELECT count(*) FROM changefeed.diff('ao_docs', '$$ || :'p3' || $$', '$$ || :'p1' || $$')$$);
SELECT try($$SELECT count(*) FROM changefeed.as_of('ao_docs', NULL)$$);
SELECT try($$SELECT count(*) FROM changefeed.diff('ao_docs', '$$ || :'p1' || $$', NULL)$$);
SELECT try($$SELECT count(*) FROM changefeed.as_of('ao_docs', 'not a position')$$);
CREATE TABLE ao_plain (id int PRIMARY KEY);
SELECT try($$SELECT count(*) FROM changefeed.as_of('ao_plain', changefeed.current_position())$$);
-- A clear after the position: the rows before it are not in the log.
CREATE TABLE ao_cleared (id int PRIMARY KEY, v int);
SELECT changefeed.enable('ao_cleared') IS NOT NULL AS enabled;
INSERT INTO ao_cleared VALUES (1, 1);
SELECT changefeed.current_position() AS c1 \gset
TRUNCATE ao_cleared;
INSERT INTO ao_cleared VALUES (2, 2);
SELECT try($$SELECT count(*) FROM changefeed.as_of('ao_cleared', '$$ || :'c1' || $$')$$);
SELECT changefeed.current_position() AS c2 \gset
UPDATE ao_cleared SET v = 3;
SELECT * FROM changefeed.as_of('ao_cleared', :'c2');
-- Without previous images a replace after the position cannot be undone; a
-- create can.
CREATE TABLE ao_noprev (id int PRIMARY KEY, v int);
SELECT changefeed.enable('ao_noprev', keep_previous => false) IS NOT NULL AS enabled;
INSERT INTO ao_noprev VALUES (1, 1);
SELECT changefeed.current_position() AS n1 \gset
INSERT INTO ao_noprev VALUES (2, 2);
SELECT * FROM changefeed.as_of('ao_noprev', :'n1');
UPDATE ao_noprev SET v = 5 WHERE id = 1;
SELECT try($$SELECT count(*) FROM changefeed.as_of('ao_noprev', '$$ || :'n1' || $$')$$);
-- A collection that logs keys alone has no images to undo with.
CREATE TABLE ao_keys (id int PRIMARY KEY, v int);
SELECT changefeed.enable('ao_keys', images => 'keys', keep_previous => false) IS NOT NULL AS enabled;
SELECT try($$SELECT count(*) FROM changefeed.as_of('ao_keys', changefeed.current_position())$$);
-- Not inside a transaction that captured changes itself.
BEGIN;
INSERT INTO ao_docs VALUES (200, 'x', 0, now());
SELECT try($$SELECT count(*) FROM changefeed.as_of('ao_docs', '$$ || :'p3' || $$')$$);
ROLLBACK;

-- Readers see what they may: a reader with some columns sees those, in the
-- rows from the table and in the images from the log alike; row-level
-- security and a tenant binding narrow the rows.
CREATE TABLE ao_secret (id int PRIMARY KEY, tenant text, v int, secret text);
SELECT changefeed.enable('ao_secret', tenant_column => 'tenant') IS NOT NULL AS enabled;
INSERT INTO ao_secret VALUES (1, 'a', 1, 's1'), (2, 'b', 2, 's2'), (3, 'a', 3, 's3');
SELECT changefeed.current_position() AS s1 \gset
UPDATE ao_secret SET v = v * 10, secret = secret || '!';
DELETE FROM ao_secret WHERE id = 3;
INSERT INTO ao_secret VALUES (4, 'b', 4, 's4');
CREATE ROLE regress_ao_columns IN ROLE changefeed_reader;
GRANT SELECT (id, tenant, v) ON ao_secret TO regress_ao_columns;
CREATE ROLE regress_ao_rls IN ROLE changefeed_reader;
GRANT SELECT ON ao_secret TO regress_ao_rls;
CREATE ROLE regress_ao_tenant IN ROLE changefeed_reader;
GRANT SELECT ON ao_secret TO regress_ao_tenant;
SELECT changefeed.bind_tenant('regress_ao_tenant', 'b');
ALTER TABLE ao_secret ENABLE ROW LEVEL SECURITY;
CREATE POLICY ao_rls_only_a ON ao_secret TO regress_ao_rls USING (tenant = 'a');
CREATE POLICY ao_others ON ao_secret TO regress_ao_columns, regress_ao_tenant USING (true);
SET ROLE regress_ao_columns;
SELECT doc_id, document FROM changefeed.as_of('ao_secret', :'s1') ORDER BY doc_id;
SELECT doc_id, operation, current, previous FROM changefeed.diff('ao_secret', :'s1', changefeed.current_position())
 ORDER BY doc_id;
RESET ROLE;
SET ROLE regress_ao_rls;
SELECT doc_id, document ->> 'secret' AS secret FROM changefeed.as_of('ao_secret', :'s1') ORDER BY doc_id;
RESET ROLE;
SET ROLE regress_ao_tenant;
SELECT doc_id, document ->> 'v' AS v FROM changefeed.as_of('ao_secret', :'s1') ORDER BY doc_id;
RESET ROLE;
-- No right to the table, no rows.
CREATE ROLE regress_ao_none IN ROLE changefeed_reader;
SET ROLE regress_ao_none;
SELECT try($$SELECT count(*) FROM changefeed.as_of('ao_secret', '$$ || :'s1' || $$')$$);
RESET ROLE;

DROP POLICY ao_rls_only_a ON ao_secret;
DROP POLICY ao_others ON ao_secret;
SELECT changefeed.unbind_tenant('regress_ao_tenant');
SELECT changefeed.disable(t) FROM unnest(ARRAY['ao_docs', 'ao_pair', 'ao_cleared', 'ao_noprev', 'ao_keys', 'ao_secret']::regclass[]) t;
DROP TABLE ao_docs, ao_pair, ao_cleared, ao_noprev, ao_keys, ao_secret, ao_plain, ao_rounds;
DROP ROLE regress_ao_columns, regress_ao_rls, regress_ao_tenant, regress_ao_none;
DROP PROCEDURE ao_history(int);
DROP FUNCTION ao_apply(jsonb, regclass, text, text);
RESET TimeZone;
