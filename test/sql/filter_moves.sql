-- A filtered read as a view defined by its filter sees the table: a replace
-- that makes a document enter the view is a create (the document after), one
-- that makes it leave a delete (the document before), one inside a replace;
-- filter_moves => false tests a replace on the document after alone.
\set SHOW_CONTEXT never
CREATE TABLE fm_orders (id int PRIMARY KEY, status text, region text, n int);
SELECT changefeed.enable('fm_orders', partition_key => '{region}', ranges => 8) IS NOT NULL AS enabled;
SELECT changefeed.current_position() AS p \gset
INSERT INTO fm_orders VALUES (1, 'pending', 'eu', 1), (2, 'shipped', 'eu', 1), (3, 'pending', 'us', 1);
UPDATE fm_orders SET status = 'shipped' WHERE id = 1;            -- leaves
UPDATE fm_orders SET status = 'pending' WHERE id = 2;            -- enters
UPDATE fm_orders SET n = 2 WHERE id = 3;                         -- stays
UPDATE fm_orders SET n = 3 WHERE id = 1;                         -- outside, stays out
-- A replace that moves the document to another range (its partition key)
-- and out of the view, into it, or inside it: one change each.
UPDATE fm_orders SET region = 'ap', status = 'shipped' WHERE id = 3;  -- leaves, moving
UPDATE fm_orders SET region = 'sa', status = 'pending' WHERE id = 1;  -- enters, moving
UPDATE fm_orders SET region = 'af' WHERE id = 2;                      -- stays, moving
DELETE FROM fm_orders WHERE id = 1;                              -- a delete inside
DELETE FROM fm_orders WHERE id = 3;                              -- a delete outside
SELECT operation, doc_id, current ->> 'status' AS now, previous ->> 'status' AS before,
       current ->> 'region' AS region_now, previous ->> 'region' AS region_before,
       split_part(event_id, '.', 4) AS side
  FROM changefeed.read('fm_orders', :'p', filter => '$.status == "pending"') ORDER BY seq, event_id;
-- Today's rule: replaces tested on the document after.
SELECT operation, doc_id, current ->> 'status' AS now
  FROM changefeed.read('fm_orders', :'p', filter => '$.status == "pending"', filter_moves => false) ORDER BY seq;
-- The latest feed tests the latest version alone, as before.
SELECT operation, doc_id FROM changefeed.read('fm_orders', :'p', mode => 'latest', filter => '$.status == "pending"')
 ORDER BY doc_id;
-- Paged one change at a time, the same changes in the same order.
CREATE FUNCTION fm_paged(pos text) RETURNS TABLE (operation text, doc_id text) LANGUAGE plpgsql AS $$
DECLARE
    r record;
    got bool;
BEGIN
    LOOP
        got := false;
        FOR r IN SELECT * FROM changefeed.read('fm_orders', pos, 1, filter => '$.status == "pending"') LOOP
            operation := r.operation; doc_id := r.doc_id; pos := r."position"; got := true;
            RETURN NEXT;
        END LOOP;
        EXIT WHEN NOT got;
    END LOOP;
END $$;
SELECT string_agg(operation || ' ' || doc_id, ', ') AS paged FROM fm_paged(:'p');

-- Without previous images a replace cannot be judged on the document before:
-- tested on the document after, as before.
CREATE TABLE fm_noprev (id int PRIMARY KEY, status text);
SELECT changefeed.enable('fm_noprev', keep_previous => false) IS NOT NULL AS enabled;
SELECT changefeed.current_position() AS q \gset
INSERT INTO fm_noprev VALUES (1, 'pending'), (2, 'shipped');
UPDATE fm_noprev SET status = 'shipped' WHERE id = 1;
UPDATE fm_noprev SET status = 'pending' WHERE id = 2;
SELECT operation, doc_id FROM changefeed.read('fm_noprev', :'q', filter => '$.status == "pending"') ORDER BY seq;

-- A reader bound to a tenant: the tenant's view and the filter's together.
CREATE TABLE fm_tenanted (id int PRIMARY KEY, tenant text, status text);
SELECT changefeed.enable('fm_tenanted', tenant_column => 'tenant') IS NOT NULL AS enabled;
SELECT changefeed.current_position() AS t \gset
INSERT INTO fm_tenanted VALUES (1, 'a', 'pending'), (2, 'b', 'pending');
UPDATE fm_tenanted SET tenant = 'b' WHERE id = 1;                      -- leaves a's view
UPDATE fm_tenanted SET tenant = 'a', status = 'shipped' WHERE id = 2;  -- enters a, not the filter's
UPDATE fm_tenanted SET status = 'pending' WHERE id = 2;                -- enters the filter's
SELECT operation, doc_id, tenant FROM changefeed.read('fm_tenanted', :'t', filter => '$.status == "pending"',
                                                       tenant => 'a') ORDER BY seq;

DROP FUNCTION fm_paged(text);
SELECT changefeed.disable(t) FROM unnest(ARRAY['fm_orders', 'fm_noprev', 'fm_tenanted']::regclass[]) t;
DROP TABLE fm_orders, fm_noprev, fm_tenanted;
