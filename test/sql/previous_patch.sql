-- A replace stores its image from before as a patch of its image after
-- where the patch is smaller (previous_patch.cpp), large rows and small;
-- and images of 128 bytes or more compressed where that makes them smaller
-- (log_writer.cpp).  Every read returns the image whole: the value
-- to_jsonb() of the old row gives, in every mode, under a filter, to a
-- tenant-scoped read and to a reader bound by row-level security.
\set SHOW_CONTEXT never
CREATE TABLE pdocs (id int PRIMARY KEY, owner text NOT NULL, n int, doc jsonb, extra jsonb);
SELECT changefeed.enable('pdocs', ranges => 2, tenant_column => 'owner') IS NOT NULL AS enabled;
-- What each update replaced, as to_jsonb(OLD), in the order of the updates
-- (the trigger's argument names the key column).
CREATE TABLE olds (k serial, id int, image jsonb);
CREATE FUNCTION keep_old() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO olds (id, image) VALUES ((to_jsonb(OLD) ->> TG_ARGV[0])::int, to_jsonb(OLD));
    RETURN NEW;
END $$;
CREATE TRIGGER keep_old BEFORE UPDATE ON pdocs FOR EACH ROW EXECUTE FUNCTION keep_old('id');
SELECT changefeed.current_position() AS p \gset
INSERT INTO pdocs
SELECT g, 'a', g,
       jsonb_build_object('body', repeat(md5(g::text), 40), 'n', g, '', 'an empty key',
                          'nested', jsonb_build_object('x', 1, 'deep', jsonb_build_object('y', 2, 'pad', repeat('z', 100)))),
       NULL
FROM generate_series(1, 14) g;
-- One field of the document.
UPDATE pdocs SET doc = jsonb_set(doc, '{n}', '100') WHERE id = 1;
-- A field added; one removed; the document's own empty key changed.
UPDATE pdocs SET doc = doc || '{"added": true}' WHERE id = 2;
UPDATE pdocs SET doc = doc - 'n' WHERE id = 3;
UPDATE pdocs SET doc = jsonb_set(doc, '{""}', '"changed"') WHERE id = 14;
-- A field two and three levels down.
UPDATE pdocs SET doc = jsonb_set(doc, '{nested,x}', '"changed"') WHERE id = 4;
UPDATE pdocs SET doc = jsonb_set(doc, '{nested,deep,y}', '3') WHERE id = 5;
-- Columns beside the document.
UPDATE pdocs SET n = n + 1, extra = '{"small": 1}' WHERE id = 6;
-- The document becomes an array, a scalar, null; a column from null to a large object.
UPDATE pdocs SET doc = '[1, 2]' WHERE id = 7;
UPDATE pdocs SET doc = '"text"' WHERE id = 8;
UPDATE pdocs SET doc = NULL WHERE id = 9;
UPDATE pdocs SET extra = doc WHERE id = 10;
-- The same number in another form (1.0, 1.00), and an update that changes nothing.
UPDATE pdocs SET doc = jsonb_set(doc, '{n}', '1.0') WHERE id = 11;
UPDATE pdocs SET doc = jsonb_set(doc, '{n}', '1.00') WHERE id = 11;
UPDATE pdocs SET n = n WHERE id = 12;
-- Everything changes: the image from before is kept whole.
UPDATE pdocs SET doc = jsonb_build_object('other', repeat('y', 1500)) WHERE id = 13;
-- One statement over many rows, and the row moved to another tenant.
UPDATE pdocs SET doc = jsonb_set(doc, '{n}', '-1') WHERE id BETWEEN 1 AND 6;
UPDATE pdocs SET owner = 'b', doc = jsonb_set(doc, '{n}', '-2') WHERE id = 6;

-- Stored as patches ({"": ...}) where one is smaller than the whole image
-- (a document turned into an array, a scalar or null: the patch holds the
-- document and leaves the other columns out); whole where everything changed.
SELECT l.doc_id::int AS id, l.op, l.previous ? '' AS patch,
       pg_column_size(l.previous) * 2 < pg_column_size(l.current) AS small
FROM changefeed.log l
WHERE l.collection_id = (SELECT id FROM changefeed.collection WHERE relid = 'pdocs'::regclass) AND l.op IN ('r', 'm')
ORDER BY l.seq;
-- Every read returns the whole image from before: to_jsonb() of the old row.
CREATE FUNCTION whole(ch jsonb[]) RETURNS TABLE (replaces bigint, whole bigint) LANGUAGE sql AS $$
    SELECT count(*), count(*) FILTER (WHERE c.prev::text = o.image::text)
    FROM unnest(ch) WITH ORDINALITY AS c(prev, k) JOIN olds o USING (k)
$$;
SELECT * FROM whole(ARRAY(SELECT previous FROM changefeed.read('pdocs', :'p', 1000)
                          WHERE operation = 'replace' ORDER BY seq));
-- The same through read_ranges(), as processors read.
SELECT * FROM whole(ARRAY(SELECT previous FROM changefeed.read_ranges('pdocs', '{0,1}', ARRAY[:'p'], 1000)
                          WHERE operation = 'replace' ORDER BY seq));
-- Read in pages of three (a page may end inside a statement).
CREATE FUNCTION paged_previous(pos text) RETURNS jsonb[] LANGUAGE plpgsql AS $$
DECLARE out jsonb[] := '{}'; r record; n int;
BEGIN
    LOOP
        n := 0;
        FOR r IN SELECT * FROM changefeed.read('pdocs', pos, 3) LOOP
            n := n + 1;
            IF r.operation = 'replace' THEN out := out || r.previous; END IF;
        END LOOP;
        EXIT WHEN n = 0;
        pos := current_setting('changefeed.read_position');
    END LOOP;
    RETURN out;
END $$;
SELECT * FROM whole(paged_previous(:'p'));
-- Under a filter on the image from before (a delete's), and mode 'latest'.
DELETE FROM pdocs WHERE id = 1;
SELECT operation, previous -> 'doc' ->> 'n' AS n_before
FROM changefeed.read('pdocs', :'p', 1000, filter => '$.doc.n == -1', filter_moves => false) WHERE doc_id = '1';
SELECT doc_id::int AS id, operation, previous::text = (SELECT image::text FROM olds o WHERE o.id = doc_id::int ORDER BY k DESC LIMIT 1) AS whole
FROM changefeed.read('pdocs', :'p', 1000, mode => 'latest') WHERE operation = 'replace' ORDER BY 1;
-- A tenant's read of the move away: a delete with its image from before.
SELECT operation, previous ->> 'owner' AS owner, previous::text = (SELECT image::text FROM olds WHERE id = 6 ORDER BY k DESC LIMIT 1) AS whole
FROM changefeed.read('pdocs', :'p', 1000, tenant => 'a') WHERE doc_id = '6' ORDER BY seq DESC LIMIT 1;
-- A reader bound by a policy on a field of the document: the update that
-- takes the row out of its sight is a delete with the whole image from before.
CREATE ROLE regress_cf_patch_reader IN ROLE changefeed_reader;
GRANT SELECT ON pdocs TO regress_cf_patch_reader;
ALTER TABLE pdocs ENABLE ROW LEVEL SECURITY;
CREATE POLICY shown ON pdocs FOR SELECT TO regress_cf_patch_reader USING (doc -> 'nested' ->> 'x' = '1');
GRANT SELECT ON olds TO regress_cf_patch_reader;
SET ROLE regress_cf_patch_reader;
SELECT operation, previous -> 'doc' -> 'nested' ->> 'x' AS x_before,
       previous::text = (SELECT image::text FROM olds WHERE id = 4 ORDER BY k LIMIT 1) AS whole
FROM changefeed.read('pdocs', :'p', 1000) WHERE doc_id = '4' ORDER BY seq;
RESET ROLE;
DROP POLICY shown ON pdocs;
ALTER TABLE pdocs DISABLE ROW LEVEL SECURITY;
REVOKE SELECT ON pdocs, olds FROM regress_cf_patch_reader;
DROP ROLE regress_cf_patch_reader;
-- whole_previous(): a whole image passes through, a damaged patch is an
-- error (XX001), never a wrong image; only the extension's owner may call it.
SELECT changefeed.whole_previous('{"a": 1}', '{"a": 2}') AS whole_passes,
       changefeed.whole_previous('{"a": 1, "b": 2}', '{"": {"a": [5], "b": [], "c": [3]}}') AS rebuilt;
SELECT try($$SELECT changefeed.whole_previous('{"a": 1}', '{"": {"a": 5}}')$$);
SELECT try($$SELECT changefeed.whole_previous('{"a": 1}', '{"": {"a": {"x": [1]}}}')$$);
SELECT try($$SELECT changefeed.whole_previous('{"a": 1}', '{"": {"z": []}}')$$);
CREATE ROLE regress_cf_patch_caller IN ROLE changefeed_reader;
SET ROLE regress_cf_patch_caller;
SELECT try($$SELECT changefeed.whole_previous('{"a": 1}', '{"a": 2}')$$);
RESET ROLE;
DROP ROLE regress_cf_patch_caller;
-- A small row (a TPC-B account): its image from before is a patch too, and
-- every read returns it whole.
CREATE TABLE psmall (aid int PRIMARY KEY, bid int, abalance int, filler char(84));
SELECT changefeed.enable('psmall') IS NOT NULL AS enabled;
TRUNCATE olds RESTART IDENTITY;
CREATE TRIGGER keep_old BEFORE UPDATE ON psmall FOR EACH ROW EXECUTE FUNCTION keep_old('aid');
SELECT changefeed.current_position() AS ps \gset
INSERT INTO psmall SELECT g, 1, 0, '' FROM generate_series(1, 3) g;
UPDATE psmall SET abalance = abalance + 10 * aid;
UPDATE psmall SET abalance = abalance - 1 WHERE aid = 2;
SELECT l.doc_id::int AS aid, l.previous::text AS stored,
       pg_column_size(l.previous) < pg_column_size(l.current) AS smaller,
       pg_column_size(l.current) < octet_length(l.current::text) AS current_compressed
FROM changefeed.log l
WHERE l.collection_id = (SELECT id FROM changefeed.collection WHERE relid = 'psmall'::regclass) AND l.op = 'r'
ORDER BY l.seq;
SELECT * FROM whole(ARRAY(SELECT previous FROM changefeed.read('psmall', :'ps', 1000)
                          WHERE operation = 'replace' ORDER BY seq));
SELECT doc_id::int AS aid, current ->> 'abalance' AS abalance, previous ->> 'abalance' AS before,
       length(current ->> 'filler') AS filler
FROM changefeed.read('psmall', :'ps', 1000) WHERE operation = 'replace' ORDER BY seq;
SELECT changefeed.disable('psmall');
DROP TABLE psmall;
DROP FUNCTION whole(jsonb[]), paged_previous(text);
SELECT changefeed.disable('pdocs');
DROP TABLE pdocs, olds;
DROP FUNCTION keep_old();
