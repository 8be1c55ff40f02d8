-- Row-level security and column privileges: every reader of a feed gets the
-- changes of the rows a SELECT of theirs would return, with the columns it
-- would return, evaluated as that reader.  Roles are cluster-wide: every one
-- made here is dropped at the end.
SET client_min_messages = warning;
CREATE ROLE regress_rls_owner LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_rls_a LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_rls_b LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_rls_group IN ROLE changefeed_reader;   -- a group regress_rls_a may SET ROLE to
GRANT regress_rls_group TO regress_rls_a;
CREATE ROLE regress_rls_cols LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_rls_keyless LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_rls_notenant LOGIN IN ROLE changefeed_reader;
GRANT CREATE ON SCHEMA public TO regress_rls_owner;
RESET client_min_messages;

SET ROLE regress_rls_owner;
-- Tenants by a setting of the reader's session.
CREATE TABLE rls_docs (id int PRIMARY KEY, tenant text NOT NULL, secret text, body text);
ALTER TABLE rls_docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY by_setting ON rls_docs FOR SELECT USING (tenant = current_setting('app.tenant', true));
GRANT SELECT ON rls_docs TO regress_rls_a, regress_rls_b, regress_rls_group;
GRANT SELECT (id, tenant, body) ON rls_docs TO regress_rls_cols;
GRANT SELECT (body) ON rls_docs TO regress_rls_keyless;
GRANT SELECT (id, body) ON rls_docs TO regress_rls_notenant;
SELECT changefeed.enable('rls_docs', ranges => 1, tenant_column => 'tenant') > 0 AS enabled;

-- The truth: what was written, in the writing transaction itself.
CREATE TABLE rls_truth (step serial, tbl text, op text, id int, old_tenant text, new_tenant text);
GRANT SELECT ON rls_truth TO PUBLIC;
CREATE FUNCTION rls_apply(tbl regclass, op text, doc int, to_tenant text DEFAULT NULL) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    old text;
BEGIN
    IF op = 'c' THEN
        EXECUTE format('INSERT INTO %s SELECT * FROM jsonb_populate_record(NULL::%s, $1)', tbl, tbl)
            USING jsonb_build_object('id', doc, 'tenant', to_tenant, 'body', 'b' || doc, 'secret', 's' || doc);
    ELSIF op = 'r' THEN
        EXECUTE format('SELECT tenant FROM %s WHERE id = $1', tbl) INTO old USING doc;
        EXECUTE format('UPDATE %s SET tenant = coalesce($2, tenant), body = body || ''+'' WHERE id = $1', tbl)
            USING doc, to_tenant;
    ELSE
        EXECUTE format('DELETE FROM %s WHERE id = $1 RETURNING tenant', tbl) INTO old USING doc;
    END IF;
    INSERT INTO rls_truth (tbl, op, id, old_tenant, new_tenant)
    VALUES (tbl::text, op, doc, old, CASE WHEN op = 'd' THEN NULL ELSE coalesce(to_tenant, old) END);
END
$$;
-- What a reader who sees the tenants `seen` must get, in order: a move into
-- its sight is a create, out of it a delete.
CREATE FUNCTION rls_expected(tbl text, seen text[], from_step int DEFAULT 0) RETURNS text[]
LANGUAGE sql AS $$
    SELECT coalesce(array_agg(CASE WHEN op = 'c' THEN 'create' WHEN op = 'd' THEN 'delete'
                                   WHEN old_tenant = ANY (seen) AND new_tenant = ANY (seen) THEN 'replace'
                                   WHEN new_tenant = ANY (seen) THEN 'create' ELSE 'delete' END || ':' || id
                              ORDER BY step), '{}')
      FROM rls_truth t
     WHERE t.tbl = rls_expected.tbl AND t.step > from_step
       AND ((op IN ('c', 'r') AND new_tenant = ANY (seen)) OR (op IN ('r', 'd') AND old_tenant = ANY (seen)))
$$;
RESET ROLE;

-- Processors of each tenant start before the writes.
SET ROLE regress_rls_a;
SELECT changefeed.lease_init('rls_docs', 'proc_a');
SET ROLE regress_rls_b;
SELECT changefeed.lease_init('rls_docs', 'proc_b');
RESET ROLE;
SELECT changefeed.current_position() AS p0 \gset

SET ROLE regress_rls_owner;
SELECT rls_apply('rls_docs', 'c', 1, 'a');
SELECT rls_apply('rls_docs', 'c', 2, 'b');
SELECT rls_apply('rls_docs', 'c', 3, 'a');
SELECT rls_apply('rls_docs', 'r', 1);          -- a stays a
SELECT rls_apply('rls_docs', 'r', 3, 'b');     -- a -> b
SELECT rls_apply('rls_docs', 'r', 2, 'a');     -- b -> a
SELECT rls_apply('rls_docs', 'c', 4, 'c');     -- nobody's here
SELECT rls_apply('rls_docs', 'r', 4, 'c');
SELECT rls_apply('rls_docs', 'd', 1);
SELECT rls_apply('rls_docs', 'c', 5, 'a');
SELECT rls_apply('rls_docs', 'r', 5);
SELECT rls_apply('rls_docs', 'd', 2);          -- b's row, then a's
SELECT rls_apply('rls_docs', 'r', 4, 'b');     -- c -> b
RESET ROLE;

-- Each tenant's reader sees exactly its share, as the truth says.
SET ROLE regress_rls_a;
SET app.tenant = 'a';
SELECT operation, doc_id, current->>'tenant' AS now_tenant, previous->>'tenant' AS was_tenant,
       substring(event_id FROM '\.([a-z]+)$') AS side
  FROM changefeed.read('rls_docs', :'p0') ORDER BY seq;
SELECT array_agg(operation || ':' || doc_id ORDER BY seq) = rls_expected('rls_docs', '{a}') AS a_as_truth
  FROM changefeed.read('rls_docs', :'p0');
-- No image of another tenant's row, before or after.
SELECT count(*) AS foreign_images FROM changefeed.read('rls_docs', :'p0')
 WHERE current->>'tenant' IS DISTINCT FROM 'a' AND current IS NOT NULL
    OR previous->>'tenant' IS DISTINCT FROM 'a' AND previous IS NOT NULL;
-- The same through read_ranges(), a processor's read: its changes, then one marker.
SELECT array_agg(operation || ':' || doc_id ORDER BY seq) FILTER (WHERE seq IS NOT NULL)
         = rls_expected('rls_docs', '{a}') AS ranges_as_truth,
       count(*) FILTER (WHERE seq IS NULL) AS markers
  FROM changefeed.read_ranges('rls_docs', ARRAY[0], ARRAY[:'p0']);
-- Mode 'latest': the last version of the rows in sight; doc 3 left it.
SELECT operation, doc_id, current->>'body' AS body, previous IS NULL AS no_previous
  FROM changefeed.read('rls_docs', :'p0', mode => 'latest') ORDER BY seq;
-- lag() counts only the changes the processor's role may see.
SELECT range_id, pending, cardinality(rls_expected('rls_docs', '{a}')) AS truth FROM changefeed.lag('rls_docs', 'proc_a');
SELECT set_config('rls.p0', :'p0', false) IS NOT NULL AS noted;
-- Paging one change at a time ends where a full read ends: skipped rows are behind every position.
DO $$
DECLARE
    pos text := current_setting('rls.p0');
    r record;
    got text[] := '{}';
    reads int := 0;
BEGIN
    LOOP
        reads := reads + 1;
        SELECT * INTO r FROM changefeed.read('rls_docs', pos, max_changes => 1);
        EXIT WHEN NOT FOUND OR reads > 50;
        got := got || (r.operation || ':' || r.doc_id);
        pos := r.position;
    END LOOP;
    RAISE NOTICE 'paged one by one: % (as truth: %)', got, got = rls_expected('rls_docs', '{a}');
END
$$;
RESET app.tenant;
-- No tenant set: the policy passes no row.
SELECT count(*) AS unset_reads FROM changefeed.read('rls_docs', :'p0');
RESET ROLE;

SET ROLE regress_rls_b;
SET app.tenant = 'b';
SELECT array_agg(operation || ':' || doc_id ORDER BY seq) = rls_expected('rls_docs', '{b}') AS b_as_truth,
       array_agg(operation || ':' || doc_id ORDER BY seq) AS b_reads
  FROM changefeed.read('rls_docs', :'p0');
SELECT range_id, pending, cardinality(rls_expected('rls_docs', '{b}')) AS truth FROM changefeed.lag('rls_docs', 'proc_b');
-- row_security = off where a policy applies: refused, as a SELECT is.
SET row_security = off;
SELECT try(format($$SELECT * FROM changefeed.read('rls_docs', %L)$$, :'p0'));
RESET row_security;
RESET app.tenant;
RESET ROLE;

-- The owner, whom its policies do not bind, reads every change.
SET ROLE regress_rls_owner;
SELECT count(*) AS owner_reads, (SELECT count(*) FROM rls_truth) AS truth FROM changefeed.read('rls_docs', :'p0');
-- A policy changed between two reads applies to the second.
ALTER POLICY by_setting ON rls_docs USING (tenant = current_setting('app.tenant', true) OR tenant = 'c');
RESET ROLE;
SET ROLE regress_rls_a;
SET app.tenant = 'a';
SELECT array_agg(operation || ':' || doc_id ORDER BY seq) = rls_expected('rls_docs', '{a,c}') AS a_and_c_as_truth,
       array_agg(operation || ':' || doc_id ORDER BY seq) AS a_and_c_reads
  FROM changefeed.read('rls_docs', :'p0');
RESET app.tenant;
RESET ROLE;
SET ROLE regress_rls_owner;
ALTER POLICY by_setting ON rls_docs USING (tenant = current_setting('app.tenant', true));
RESET ROLE;

-- Columns: a role granted some columns gets images of those alone.
SET ROLE regress_rls_cols;
SET app.tenant = 'a';
SELECT operation, doc_id, (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(current) k) AS current_keys,
       (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(previous) k) AS previous_keys
  FROM changefeed.read('rls_docs', :'p0') ORDER BY seq;
-- A filter on a column it may not see is refused; on one it may, it works.
SELECT try(format($$SELECT * FROM changefeed.read('rls_docs', %L, filter => '$.secret == "s3"')$$, :'p0'));
SELECT doc_id FROM changefeed.read('rls_docs', :'p0', filter => '$.body == "b5+"');
-- A wildcard tests only what it may see: no secret matches.
SELECT count(*) AS wildcard_matches FROM changefeed.read('rls_docs', :'p0', filter => '$.* == "s3"');
RESET app.tenant;
RESET ROLE;
-- Without the tenant column: no tenant in the rows, and no read by tenant.
SET ROLE regress_rls_notenant;
SET app.tenant = 'a';
SELECT operation, doc_id, tenant, current FROM changefeed.read('rls_docs', :'p0') ORDER BY seq LIMIT 3;
SELECT try(format($$SELECT * FROM changefeed.read('rls_docs', %L, tenant => 'a')$$, :'p0'));
RESET app.tenant;
RESET ROLE;
-- Without SELECT on the key columns, the feed is refused, naming them.
SET ROLE regress_rls_keyless;
\set SHOW_CONTEXT never
SELECT * FROM changefeed.read('rls_docs', :'p0');
\set SHOW_CONTEXT errors
RESET ROLE;

-- A clear goes to every reader.
SELECT changefeed.current_position() AS p1 \gset
SET ROLE regress_rls_owner;
CREATE TABLE rls_scratch (id int PRIMARY KEY, tenant text);
ALTER TABLE rls_scratch ENABLE ROW LEVEL SECURITY;
CREATE POLICY by_setting ON rls_scratch USING (tenant = current_setting('app.tenant', true));
GRANT SELECT ON rls_scratch TO regress_rls_a;
SELECT changefeed.enable('rls_scratch', ranges => 1) > 0 AS enabled;
SELECT changefeed.current_position() AS p2 \gset
INSERT INTO rls_scratch VALUES (1, 'b');
TRUNCATE rls_scratch;
RESET ROLE;
SET ROLE regress_rls_a;
SET app.tenant = 'a';
SELECT operation, doc_id FROM changefeed.read('rls_scratch', :'p2');
RESET app.tenant;
RESET ROLE;

-- An image that no longer converts to the row type (a column's type changed
-- after it was logged) ends the read, showing none of its values.  (The
-- guard refuses such a type change on an enabled table, rewrites.sql: it is
-- forced past the guard here, as a superuser can.)
SET ROLE regress_rls_owner;
ALTER TABLE rls_scratch ADD COLUMN n text;
SELECT changefeed.current_position() AS p3 \gset
INSERT INTO rls_scratch VALUES (2, 'b', 'not a number');
RESET ROLE;
BEGIN;
SELECT changefeed.suspend_guard(true);
ALTER TABLE rls_scratch ALTER COLUMN n TYPE int USING 0;
COMMIT;
SET ROLE regress_rls_a;
SELECT try(format($$SELECT * FROM changefeed.read('rls_scratch', %L)$$, :'p3'));
RESET ROLE;

-- Tenants by a role-mapping table: the policy is evaluated as current_user,
-- as a SELECT by the reader is, SET ROLE included.
SET ROLE regress_rls_owner;
CREATE TABLE rls_tenant_map (role_name name, tenant text);
GRANT SELECT ON rls_tenant_map TO PUBLIC;
INSERT INTO rls_tenant_map VALUES ('regress_rls_a', 'a'), ('regress_rls_b', 'b'), ('regress_rls_group', 'g');
CREATE TABLE rls_mapped (id int PRIMARY KEY, tenant text, body text);
ALTER TABLE rls_mapped ENABLE ROW LEVEL SECURITY;
CREATE POLICY by_map ON rls_mapped
    USING (tenant IN (SELECT m.tenant FROM rls_tenant_map m WHERE m.role_name = current_user));
GRANT SELECT ON rls_mapped TO regress_rls_a, regress_rls_b, regress_rls_group;
SELECT changefeed.enable('rls_mapped', ranges => 1) > 0 AS enabled;
RESET ROLE;
SELECT changefeed.current_position() AS m0 \gset
SET ROLE regress_rls_owner;
SELECT rls_apply('rls_mapped', 'c', 1, 'a');
SELECT rls_apply('rls_mapped', 'c', 2, 'b');
SELECT rls_apply('rls_mapped', 'c', 3, 'g');
SELECT rls_apply('rls_mapped', 'r', 1, 'g');   -- a -> g
SELECT rls_apply('rls_mapped', 'r', 2, 'a');   -- b -> a
SELECT rls_apply('rls_mapped', 'd', 3);
RESET ROLE;
SET ROLE regress_rls_a;
SELECT current_user, array_agg(operation || ':' || doc_id ORDER BY seq) AS reads,
       array_agg(operation || ':' || doc_id ORDER BY seq) = rls_expected('rls_mapped', '{a}') AS as_truth,
       (SELECT array_agg(id ORDER BY id) FROM rls_mapped) AS selects
  FROM changefeed.read('rls_mapped', :'m0');
SET ROLE regress_rls_group;
SELECT current_user, array_agg(operation || ':' || doc_id ORDER BY seq) AS reads,
       array_agg(operation || ':' || doc_id ORDER BY seq) = rls_expected('rls_mapped', '{g}') AS as_truth,
       (SELECT array_agg(id ORDER BY id) FROM rls_mapped) AS selects
  FROM changefeed.read('rls_mapped', :'m0');
RESET ROLE;
SET ROLE regress_rls_b;
SELECT current_user, array_agg(operation || ':' || doc_id ORDER BY seq) AS reads,
       array_agg(operation || ':' || doc_id ORDER BY seq) = rls_expected('rls_mapped', '{b}') AS as_truth
  FROM changefeed.read('rls_mapped', :'m0');
RESET ROLE;
-- The same policy as a sublink on the row (EXISTS ... m.tenant = rls_mapped.tenant) reads alike.
SET ROLE regress_rls_owner;
ALTER POLICY by_map ON rls_mapped
    USING (EXISTS (SELECT 1 FROM rls_tenant_map m WHERE m.tenant = rls_mapped.tenant AND m.role_name = current_user));
RESET ROLE;
SET ROLE regress_rls_a;
SELECT array_agg(operation || ':' || doc_id ORDER BY seq) = rls_expected('rls_mapped', '{a}') AS correlated_as_truth
  FROM changefeed.read('rls_mapped', :'m0');
RESET ROLE;
-- The mapping changes between two reads: the second follows it.
UPDATE rls_tenant_map SET tenant = 'g' WHERE role_name = 'regress_rls_b';
SET ROLE regress_rls_b;
SELECT array_agg(operation || ':' || doc_id ORDER BY seq) = rls_expected('rls_mapped', '{g}') AS b_now_as_g
  FROM changefeed.read('rls_mapped', :'m0');
RESET ROLE;

-- A policy's function runs as the reader, never as the extension's owner,
-- inside a security-restricted operation, with search_path = pg_catalog,
-- pg_temp (the function names what it uses).
SET ROLE regress_rls_owner;
CREATE TABLE rls_witness (who text, tenant text);
GRANT INSERT ON rls_witness TO PUBLIC;
CREATE FUNCTION rls_watch(t text) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.rls_witness VALUES (current_user, t);
    IF t = 'escape' THEN
        CREATE TEMP TABLE rls_escape (x int);   -- refused in a security-restricted operation
    END IF;
    RETURN t = 'a';
END
$$;
CREATE TABLE rls_watched (id int PRIMARY KEY, tenant text);
ALTER TABLE rls_watched ENABLE ROW LEVEL SECURITY;
CREATE POLICY watched ON rls_watched USING (rls_watch(tenant));
GRANT SELECT ON rls_watched TO regress_rls_a;
SELECT changefeed.enable('rls_watched', ranges => 1) > 0 AS enabled;
RESET ROLE;
SELECT changefeed.current_position() AS w0 \gset
SET ROLE regress_rls_owner;
INSERT INTO rls_watched VALUES (1, 'a');
INSERT INTO rls_watched VALUES (2, 'b');
RESET ROLE;
SET ROLE regress_rls_a;
SELECT operation, doc_id FROM changefeed.read('rls_watched', :'w0');
RESET ROLE;
SELECT who, tenant, count(*) > 0 AS evaluated FROM rls_witness GROUP BY who, tenant ORDER BY 1, 2;
SET ROLE regress_rls_owner;
INSERT INTO rls_watched VALUES (3, 'escape');
RESET ROLE;
SET ROLE regress_rls_a;
SELECT try(format($$SELECT * FROM changefeed.read('rls_watched', %L)$$, :'w0'));
RESET ROLE;

-- A policy calls a function the reader may not EXECUTE: its own SELECT is
-- refused, and so is its read of the feed, rather than the policy being
-- evaluated with the extension owner's rights.
SET ROLE regress_rls_owner;
CREATE FUNCTION rls_vetted(t text) RETURNS bool LANGUAGE sql IMMUTABLE AS $$ SELECT t = 'a' $$;
REVOKE EXECUTE ON FUNCTION rls_vetted(text) FROM PUBLIC;
CREATE TABLE rls_vetted_docs (id int PRIMARY KEY, tenant text);
ALTER TABLE rls_vetted_docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY vetted ON rls_vetted_docs USING (rls_vetted(tenant));
GRANT SELECT ON rls_vetted_docs TO regress_rls_a;
SELECT changefeed.enable('rls_vetted_docs', ranges => 1) > 0 AS enabled;
RESET ROLE;
SELECT changefeed.current_position() AS v0 \gset
SET ROLE regress_rls_owner;
INSERT INTO rls_vetted_docs VALUES (1, 'a'), (2, 'b');
RESET ROLE;
SET ROLE regress_rls_a;
SELECT try($$SELECT * FROM rls_vetted_docs$$);
SELECT try(format($$SELECT * FROM changefeed.read('rls_vetted_docs', %L)$$, :'v0'));
RESET ROLE;
SET ROLE regress_rls_owner;
GRANT EXECUTE ON FUNCTION rls_vetted(text) TO regress_rls_a;
RESET ROLE;
SET ROLE regress_rls_a;
SELECT operation, doc_id FROM changefeed.read('rls_vetted_docs', :'v0');
RESET ROLE;

-- A row that leaves a reader's sight by a change of its partition key is a
-- delete where it was: the partition key and the range before, not the ones
-- it went to (which would tell the reader where the row went), in the order
-- of the range the document was in.
SET ROLE regress_rls_owner;
CREATE TABLE rls_moving (id int PRIMARY KEY, tenant text NOT NULL, region text NOT NULL);
ALTER TABLE rls_moving ENABLE ROW LEVEL SECURITY;
CREATE POLICY eu_only ON rls_moving USING (region = 'eu');
GRANT SELECT ON rls_moving TO regress_rls_a;
SELECT changefeed.enable('rls_moving', ranges => 16, partition_key => '{tenant,region}',
                         tenant_column => 'tenant') > 0 AS enabled;
RESET ROLE;
SELECT changefeed.current_position() AS m0 \gset
SET ROLE regress_rls_owner;
INSERT INTO rls_moving VALUES (1, 'a', 'eu'), (2, 'a', 'eu');
UPDATE rls_moving SET region = 'us-secret' WHERE id = 1;   -- leaves the policy's sight
UPDATE rls_moving SET tenant = 'b-secret' WHERE id = 2;    -- leaves tenant a
RESET ROLE;
SET ROLE regress_rls_a;
SELECT operation, doc_id, partition_key, tenant, range_id = changefeed.range_of(partition_key, 16) AS in_its_range
  FROM changefeed.read('rls_moving', :'m0') ORDER BY seq;
RESET ROLE;
SELECT operation, doc_id, partition_key, tenant, range_id = changefeed.range_of(partition_key, 16) AS in_its_range
  FROM changefeed.read('rls_moving', :'m0', tenant => 'a') ORDER BY seq;
SELECT operation, doc_id, partition_key, tenant, range_id = changefeed.range_of(partition_key, 16) AS in_its_range
  FROM changefeed.read('rls_moving', :'m0') ORDER BY seq;
-- In mode 'latest' the range a document left no longer gives its older version.
SELECT doc_id, partition_key, range_id = changefeed.range_of(partition_key, 16) AS in_its_range
  FROM changefeed.read('rls_moving', :'m0', mode => 'latest') ORDER BY doc_id;

-- Clean up (roles are cluster-wide).
SELECT changefeed.disable(t, forget => true) IS NOT NULL
  FROM unnest('{rls_docs,rls_scratch,rls_mapped,rls_watched,rls_vetted_docs,rls_moving}'::regclass[]) t;
SET client_min_messages = warning;
DROP OWNED BY regress_rls_owner, regress_rls_a, regress_rls_b, regress_rls_group, regress_rls_cols,
              regress_rls_keyless, regress_rls_notenant CASCADE;
DROP ROLE regress_rls_owner, regress_rls_a, regress_rls_b, regress_rls_group, regress_rls_cols,
          regress_rls_keyless, regress_rls_notenant;
RESET client_min_messages;
