-- Capture builds row images straight from the tuple (extension/capture/row_image.cpp).
-- Each image must be the value to_jsonb() gives for the same row, on every
-- column type the direct form covers, and on those it leaves to to_jsonb().
CREATE DOMAIN ri_positive AS int CHECK (VALUE > 0);
CREATE DOMAIN ri_label AS text;
CREATE TYPE ri_mood AS ENUM ('calm', 'loud');
CREATE TABLE ri_docs (
    id bigint PRIMARY KEY,
    dropped_early int,
    small smallint, medium int, big bigint,
    real_n real, double_n double precision, exact numeric, exact_scaled numeric(12, 4),
    flag bool, note text, short varchar(20), padded char(6), label ri_label, positive ri_positive,
    day date, at_local timestamp, at timestamptz, span interval, moment time, uid uuid, addr inet,
    doc jsonb, scalar_doc jsonb, raw bytea, "Mixed Case" text, "ключ" text,
    doubled bigint GENERATED ALWAYS AS (medium::bigint * 2) STORED
);
ALTER TABLE ri_docs DROP COLUMN dropped_early;
-- Tables whose images to_jsonb() builds: arrays, composites, json, an enum.
CREATE TABLE ri_other (id int PRIMARY KEY, tags text[], mood ri_mood, j json, pair ri_docs);
-- Wider than one stride of jsonb's offsets (32 entries), keys and values.
SELECT format('CREATE TABLE ri_wide (id int PRIMARY KEY, %s)',
              string_agg(format('c%s %s', g, CASE WHEN g % 3 = 0 THEN 'text' ELSE 'int' END), ', '))
  FROM generate_series(1, 40) g \gexec
SELECT changefeed.enable('ri_wide') IS NOT NULL;
SELECT format('INSERT INTO ri_wide VALUES (1, %s)',
              string_agg(CASE WHEN g % 3 = 0 THEN quote_literal(repeat('v', g)) WHEN g % 7 = 0 THEN 'NULL'
                              ELSE g::text END, ', '))
  FROM generate_series(1, 40) g \gexec
UPDATE ri_wide SET c20 = 2000, c39 = 'changed';
SELECT l.op, l.current = to_jsonb(w) AS same, l.current::text = to_jsonb(w)::text AS same_text,
       l.current -> 'c39' AS c39, changefeed.whole_previous(l.current, l.previous) -> 'c39' AS was,
       l.previous ? '' AS stored_as_patch, l.current -> 'c35' AS c35
  FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id, ri_wide w
 WHERE c.relid = 'ri_wide'::regclass ORDER BY l.seq;
SELECT changefeed.enable('ri_docs') IS NOT NULL;
SELECT changefeed.enable('ri_other') IS NOT NULL;

INSERT INTO ri_docs (id, small, medium, big, real_n, double_n, exact, exact_scaled, flag, note, short, padded,
                     label, positive, day, at_local, at, span, moment, uid, addr, doc, scalar_doc, raw,
                     "Mixed Case", "ключ")
VALUES (1, -32768, -2147483648, -9223372036854775808, 1.5, 0.1, 123456789.000123456, 3.14159,
        true, 'plain', 'ab', 'x', 'lbl', 7, '2026-12-01', '2026-12-01 10:11:12.345678',
        '2026-12-01 10:11:12+03', '1 day 2 hours', '10:11', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '10.0.0.1/8',
        '{"b": [1, 2.50, {"c": null}], "a": "x", "n": 1e3, "t": true}', '"just a string"', '\x00ff',
        'm', 'к'),
       (2, 32767, 2147483647, 9223372036854775807, 'NaN', 'Infinity', 'NaN', -0.0001,
        false, E'tab\there "quoted" \\ back', '', '', '', 1, 'infinity', '-infinity', 'infinity', '0', '00:00',
        NULL, '::1', '[]', '12.500', '', '', ''),
       (3, 0, 0, 0, '-Infinity', -0.0, 0, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, '{}', 'null', NULL, NULL, NULL),
       (4, 1, 1, 1, 1e-30, 1.7976931348623157e308, 1e100, 1, true, repeat('long ', 5000), 'z', 'z', 'z', 2,
        '0001-01-01 BC', '294276-12-31 23:59:59', '1999-12-31 23:59:59.999999+00', '-1 mon', '23:59:59', NULL, NULL,
        (SELECT jsonb_object_agg('k' || g, g) FROM generate_series(1, 100) g),
        'true', decode(repeat('ab', 3000), 'hex'), NULL, NULL);
UPDATE ri_docs SET medium = medium / 2 + 1, doc = doc || '{"z": 1}' WHERE id IN (1, 3);
INSERT INTO ri_other VALUES (1, ARRAY['a', NULL], 'calm', '{"b": 1, "a": [1,  2]}',
                             (SELECT r FROM ri_docs r WHERE id = 1));
UPDATE ri_other SET mood = 'loud';

-- Every image equals to_jsonb() of its row, as a value and as text.
CREATE FUNCTION ri_images(tbl regclass) RETURNS TABLE (op "char", doc_id text, image jsonb, previous jsonb)
LANGUAGE sql AS $$
    SELECT l.op, l.doc_id, l.current, changefeed.whole_previous(l.current, l.previous)
      FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id
     WHERE c.relid = tbl ORDER BY l.seq
$$;
SELECT i.op, i.doc_id, i.image = to_jsonb(d) AS same, i.image::text = to_jsonb(d)::text AS same_text
  FROM ri_images('ri_docs') i JOIN ri_docs d ON d.id::text = i.doc_id
 WHERE i.op = 'r' ORDER BY i.doc_id;
-- The images of the inserts and the previous images of the updates, against
-- the rows rebuilt as they were then.
SELECT count(*) AS images, count(*) FILTER (WHERE i.image = to_jsonb(r) AND i.image::text = to_jsonb(r)::text) AS same
  FROM ri_images('ri_docs') i, LATERAL jsonb_populate_record(NULL::ri_docs, i.image) r
 WHERE i.op = 'c';
SELECT count(*) AS previous, count(*) FILTER (WHERE i.previous::text = c.image::text) AS same_as_created
  FROM ri_images('ri_docs') i JOIN ri_images('ri_docs') c ON c.doc_id = i.doc_id AND c.op = 'c'
 WHERE i.op = 'r';
-- A few values, as a reader sees them.
SELECT i.image -> 'big' AS big, i.image -> 'real_n' AS real_n, i.image -> 'exact' AS exact,
       i.image -> 'at' AS at, i.image -> 'scalar_doc' AS scalar_doc, i.image -> 'padded' AS padded,
       i.image -> 'doubled' AS doubled, i.image ? 'dropped_early' AS has_dropped
  FROM ri_images('ri_docs') i WHERE i.op = 'c' ORDER BY i.doc_id::int;
SELECT jsonb_object_keys(image) AS key FROM ri_images('ri_docs') WHERE op = 'c' AND doc_id = '1';
-- to_jsonb() still builds what the direct form does not cover.
SELECT i.image = to_jsonb(o) AS same, i.image::text = to_jsonb(o)::text AS same_text,
       i.previous::text = c.image::text AS previous_as_created, i.previous ->> 'mood' AS was
  FROM ri_images('ri_other') i JOIN ri_other o ON o.id::text = i.doc_id
  JOIN ri_images('ri_other') c ON c.doc_id = i.doc_id AND c.op = 'c'
 WHERE i.op = 'r';
SELECT changefeed.disable('ri_docs');
SELECT changefeed.disable('ri_other');
SELECT changefeed.disable('ri_wide');
DROP TABLE ri_other, ri_docs, ri_wide;
DROP FUNCTION ri_images(regclass);
DROP TYPE ri_mood;
DROP DOMAIN ri_positive, ri_label;
