-- Integrity of capture: every write path to an enabled table is captured or
-- refused, never silently missed.  DDL that would open a hole is refused
-- (CF013), a replica-mode write to a table not enabled for it too (CF014);
-- verify() reports what is not intact.
\set SHOW_CONTEXT never
-- Shows SQLSTATE, message and detail, with collection ids masked.
CREATE FUNCTION try_detail(stmt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    state text; msg text; detail text;
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
    RETURN regexp_replace(state || ': ' || msg || coalesce(' | ' || nullif(detail, ''), ''),
                          '(collection |changefeed_truncate_guard_)[0-9]+', '\1N', 'g');
END
$$;
CREATE FUNCTION verify_masked() RETURNS TABLE (table_name regclass, intact bool, problems text)
LANGUAGE sql AS $$
    SELECT table_name, intact,
           regexp_replace(array_to_string(problems, E'\n'), '(collection |changefeed_truncate_guard_)[0-9]+', '\1N', 'g')
      FROM changefeed.verify()
     WHERE table_name::text IN ('accounts', 'notes', 'mirrored', 'tree', 'coded', 'restored')
     ORDER BY collection_id
$$;

-- A partitioned table whose partition has another column order: columns go
-- by name, so ids and partition keys come out right in every partition.
CREATE TABLE accounts (id int, region text, name text, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE accounts_eu PARTITION OF accounts FOR VALUES IN ('eu');
CREATE TABLE accounts_us (name text, extra int, region text NOT NULL, id int NOT NULL);
ALTER TABLE accounts_us DROP COLUMN extra;
ALTER TABLE accounts ATTACH PARTITION accounts_us FOR VALUES IN ('us');
SELECT changefeed.enable('accounts', partition_key => '{region}', ranges => 4) AS accounts_id \gset
SELECT start_cursor('accounts');
INSERT INTO accounts VALUES (1, 'eu', 'u1'), (2, 'us', 'u2');
UPDATE accounts SET name = 'u2b' WHERE id = 2;       -- a non-key column: a replace
UPDATE accounts SET id = 3 WHERE id = 2;             -- the key: delete + create
DELETE FROM accounts WHERE id = 1;
SELECT operation, doc_id, range_id = changefeed.range_of(coalesce(current, previous) ->> 'region', 4) AS range_ok,
       current ->> 'name' AS name, previous ->> 'name' AS prev_name
  FROM next_changes('accounts', 'accounts');
SELECT DISTINCT partition_key FROM changefeed.log WHERE collection_id = :accounts_id ORDER BY 1;
SELECT * FROM verify_masked();

-- TRUNCATE of a partition is refused; of the partitioned table, captured as clear.
SELECT try_detail('TRUNCATE accounts_us');
SELECT try_detail('TRUNCATE accounts_eu, accounts_us');
TRUNCATE accounts;
SELECT operation, count(*) FROM next_changes('accounts', 'accounts') GROUP BY 1;

-- DETACH and DROP of a partition are refused: its rows would leave the table
-- without a change.
SELECT try_detail('ALTER TABLE accounts DETACH PARTITION accounts_us');
ALTER TABLE accounts DETACH PARTITION accounts_us CONCURRENTLY;
SELECT try_detail('DROP TABLE accounts_us');
CREATE SCHEMA side;
CREATE TABLE side.accounts_asia PARTITION OF accounts FOR VALUES IN ('asia');
SELECT try_detail('DROP SCHEMA side CASCADE');
-- A partition created or attached later is guarded too (and captured).
SELECT regexp_replace(tgname, '_[0-9]+$', '_<id>') AS tgname, tgenabled
  FROM pg_trigger WHERE tgrelid = 'side.accounts_asia'::regclass ORDER BY 1;
CREATE TABLE accounts_sa (region text NOT NULL, name text, id int NOT NULL) PARTITION BY LIST (region);
CREATE TABLE accounts_sa_br PARTITION OF accounts_sa FOR VALUES IN ('br');
ALTER TABLE accounts ATTACH PARTITION accounts_sa FOR VALUES IN ('br');
SELECT tgrelid::regclass, regexp_replace(tgname, '_[0-9]+$', '_<id>') AS tgname, tgenabled FROM pg_trigger
 WHERE tgrelid IN ('accounts_sa'::regclass, 'accounts_sa_br'::regclass) ORDER BY 1, 2;
INSERT INTO accounts VALUES (7, 'br', 'b7'), (8, 'asia', 'a8');
-- A table attached with rows in it would bring them in without a change: refused.
CREATE TABLE accounts_mx (name text, id int NOT NULL, region text NOT NULL);
INSERT INTO accounts_mx VALUES ('m1', 1, 'mx');
SELECT try_detail($$ALTER TABLE accounts ATTACH PARTITION accounts_mx FOR VALUES IN ('mx')$$);
DROP TABLE accounts_mx;
SELECT operation, doc_id FROM next_changes('accounts', 'accounts');
SELECT try_detail('TRUNCATE accounts_sa_br');
SELECT try_detail('ALTER TABLE accounts_sa DETACH PARTITION accounts_sa_br');
SELECT * FROM verify_masked();

-- The capture triggers cannot be disabled, dropped, renamed or replaced,
-- not even by the table's owner.
CREATE ROLE integrity_owner;
GRANT USAGE, CREATE ON SCHEMA public TO integrity_owner;
ALTER TABLE accounts OWNER TO integrity_owner;
ALTER TABLE accounts_eu OWNER TO integrity_owner;
CREATE TABLE notes (id int PRIMARY KEY, body text, tenant text, expires timestamptz);
SELECT changefeed.enable('notes', tenant_column => 'tenant', ttl_column => 'expires') IS NOT NULL AS enabled;
ALTER TABLE notes OWNER TO integrity_owner;
SET ROLE integrity_owner;
SELECT try_detail('ALTER TABLE notes DISABLE TRIGGER changefeed_capture');
SELECT try_detail('ALTER TABLE notes DISABLE TRIGGER ALL');
SELECT try_detail('ALTER TABLE notes DISABLE TRIGGER USER');
SELECT try_detail('ALTER TABLE notes ENABLE REPLICA TRIGGER changefeed_capture');
SELECT try_detail('ALTER TABLE notes ENABLE TRIGGER changefeed_capture_truncate');
SELECT try_detail('ALTER TABLE accounts_eu DISABLE TRIGGER changefeed_capture');
SELECT try_detail('DROP TRIGGER changefeed_capture ON notes');
SELECT try_detail('DROP TRIGGER changefeed_capture_truncate ON notes');
SELECT try_detail('ALTER TRIGGER changefeed_capture ON notes RENAME TO quiet');
-- Key, partition-key, tenant and TTL columns cannot be dropped, retyped or renamed.
SELECT try_detail('ALTER TABLE notes DROP COLUMN tenant');
SELECT try_detail('ALTER TABLE notes ALTER COLUMN expires TYPE date');
SELECT try_detail('ALTER TABLE notes RENAME COLUMN id TO note_id');
SELECT try_detail('ALTER TABLE notes ALTER COLUMN id TYPE bigint');
-- The primary key cannot be dropped or moved to other columns.
SELECT try_detail('ALTER TABLE notes DROP CONSTRAINT notes_pkey');
SELECT try_detail('ALTER TABLE notes DROP CONSTRAINT notes_pkey, ADD PRIMARY KEY (body)');
-- Inheritance children of an enabled table are refused.
SELECT try_detail('CREATE TABLE notes_child () INHERITS (notes)');
CREATE TABLE notes_orphan (id int NOT NULL, body text, tenant text, expires timestamptz);
SELECT try_detail('ALTER TABLE notes_orphan INHERIT notes');
-- Other columns, other triggers and unrelated DDL go on as usual.
ALTER TABLE notes ADD COLUMN color text;
ALTER TABLE notes RENAME COLUMN body TO text_body;
ALTER TABLE notes ALTER COLUMN color TYPE varchar;
CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
CREATE TRIGGER my_trigger AFTER INSERT ON notes FOR EACH ROW EXECUTE FUNCTION noop();
ALTER TABLE notes DISABLE TRIGGER my_trigger;
DROP TRIGGER my_trigger ON notes;
CREATE TEMP TABLE scratch (id int PRIMARY KEY, v text);
ALTER TABLE scratch ADD COLUMN w int;
CREATE TEMP TABLE scratch_child () INHERITS (scratch);
DROP TABLE scratch CASCADE;
CREATE TABLE mine (id int PRIMARY KEY, v text) PARTITION BY RANGE (id);
CREATE TABLE mine_1 PARTITION OF mine FOR VALUES FROM (0) TO (10);
CREATE TABLE mine_2 (id int NOT NULL, v text);
ALTER TABLE mine ATTACH PARTITION mine_2 FOR VALUES FROM (10) TO (20);
ALTER TABLE mine DETACH PARTITION mine_1;
TRUNCATE mine_2;
CREATE TABLE mine_child () INHERITS (mine_1);
ALTER TABLE mine_1 DISABLE TRIGGER ALL;
DROP TABLE mine, mine_1 CASCADE;
DROP TABLE notes_orphan;
RESET ROLE;
-- Replacing a capture trigger or imitating one is refused, also for a superuser.
SELECT try_detail($$CREATE OR REPLACE TRIGGER changefeed_capture AFTER INSERT ON notes
    FOR EACH ROW EXECUTE FUNCTION changefeed.capture_row('1', '16', 't', 'f', '1', 'id', '1', 'id', '')$$);
SELECT try_detail($$CREATE TRIGGER changefeed_capture_too AFTER INSERT ON notes
    FOR EACH ROW EXECUTE FUNCTION changefeed.capture_row('1', '16', 't', 'f', '1', 'id', '1', 'id', '')$$);
SELECT try_detail('ALTER TABLE accounts RENAME COLUMN region TO area');
SELECT try_detail('ALTER TABLE accounts ALTER COLUMN id TYPE bigint');

-- Replica mode: without replicated => true, writes are refused (CF014);
-- with it, they are captured.
SET session_replication_role = replica;
SELECT try_detail($$INSERT INTO notes (id, text_body) VALUES (100, 'replica')$$);
SELECT try_detail($$INSERT INTO accounts VALUES (100, 'eu', 'replica')$$);
SELECT try_detail('TRUNCATE notes');
SELECT try_detail('TRUNCATE accounts_eu');
-- The guard still works in replica mode.
SELECT try_detail('ALTER TABLE notes DISABLE TRIGGER ALL');
RESET session_replication_role;
SELECT count(*) AS replica_rows FROM notes WHERE id = 100;
CREATE TABLE mirrored (id int PRIMARY KEY, v text);
SELECT changefeed.enable('mirrored', replicated => true) IS NOT NULL AS enabled;
SELECT changefeed.enable('mirrored', replicated => true) = changefeed.enable('mirrored', replicated => true) AS idempotent;
SELECT try('SELECT changefeed.enable(''mirrored'')');
SELECT try('SELECT changefeed.enable(''mirrored'', replicated => null)');
SELECT table_name, replicated FROM changefeed.collections WHERE table_name = 'mirrored'::regclass;
SELECT start_cursor('mirrored');
SET session_replication_role = replica;
INSERT INTO mirrored VALUES (1, 'applied'), (2, 'applied');
UPDATE mirrored SET v = 'changed' WHERE id = 2;
TRUNCATE mirrored;
RESET session_replication_role;
SELECT operation, doc_id, count(*) FROM next_changes('mirrored', 'mirrored') GROUP BY 1, 2 ORDER BY min(seq);

-- enable() refuses shapes whose writes could escape: inheritance parents and
-- children, partitions (enable the partitioned table), enabled partitions.
CREATE TABLE base (id int PRIMARY KEY);
CREATE TABLE derived (extra int) INHERITS (base);
ALTER TABLE derived ADD PRIMARY KEY (id);
SELECT try_detail('SELECT changefeed.enable(''base'')');
SELECT try_detail('SELECT changefeed.enable(''derived'')');
SELECT try_detail('SELECT changefeed.enable(''accounts_eu'')');
CREATE TABLE tree (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE leaf (id int PRIMARY KEY);
SELECT changefeed.enable('leaf') IS NOT NULL AS enabled;
SELECT try_detail('ALTER TABLE tree ATTACH PARTITION leaf FOR VALUES FROM (0) TO (10)');
SELECT changefeed.disable('leaf');
ALTER TABLE tree ATTACH PARTITION leaf FOR VALUES FROM (0) TO (10);
SELECT changefeed.enable('tree') IS NOT NULL AS enabled;
SELECT try_detail('SELECT changefeed.enable(''leaf'')');

-- A dropped type takes its columns along: refused for a key column.
CREATE DOMAIN code AS text;
CREATE TABLE coded (c code PRIMARY KEY, v int);
SELECT changefeed.enable('coded') IS NOT NULL AS enabled;
SELECT try_detail('DROP DOMAIN code CASCADE');

-- verify() reports holes forced past the guard (here with the guard
-- suspended; a superuser can also drop the event triggers).
SELECT * FROM verify_masked();
BEGIN;
SELECT changefeed.suspend_guard(true);
ALTER TABLE notes DISABLE TRIGGER changefeed_capture;
DROP TRIGGER changefeed_capture_truncate ON notes;
ALTER TABLE accounts DETACH PARTITION accounts_us;
CREATE TABLE notes_child () INHERITS (notes);
ALTER TABLE coded ALTER COLUMN v TYPE bigint;
ALTER TABLE coded RENAME COLUMN c TO code;
SELECT changefeed.suspend_guard(false);
SELECT * FROM verify_masked() WHERE NOT intact;
ROLLBACK;
-- The suspension ends with the transaction, also when it fails.
BEGIN;
SELECT changefeed.suspend_guard(true);
SELECT 1 / 0;
ROLLBACK;
SELECT changefeed.guard_suspended();
SELECT try_detail('ALTER TABLE notes DISABLE TRIGGER changefeed_capture');

SELECT count(*) FILTER (WHERE NOT intact) AS not_intact FROM changefeed.verify();

-- The extension's own DDL passes: alter() reinstalls the triggers, disable()
-- removes them (and the partitions' TRUNCATE guards), enable() again.
SELECT changefeed.alter('accounts', keep_previous => false);
SELECT changefeed.disable('accounts');
SELECT count(*) AS triggers_left FROM pg_trigger WHERE tgname LIKE 'changefeed%'
   AND tgrelid IN (SELECT relid FROM pg_partition_tree('accounts'));
TRUNCATE accounts_us;
SELECT changefeed.enable('accounts', partition_key => '{region}', ranges => 4) IS NOT NULL AS enabled;
SELECT * FROM verify_masked();

-- A restore (pg_restore) recreates things in an order the guard accepts: the
-- collection rows come before the table's primary key and triggers, and the
-- capture triggers come one statement at a time, each then enabled ALWAYS.
CREATE TABLE restored (id int NOT NULL, v text);
INSERT INTO changefeed.collection (relid, key_columns, partition_key, column_types)
VALUES ('restored'::regclass, '{id}', '{id}', '{"id": "integer"}') RETURNING id AS restored_id \gset
SELECT * FROM verify_masked() WHERE table_name = 'restored'::regclass;
ALTER TABLE ONLY restored ADD CONSTRAINT restored_pkey PRIMARY KEY (id);
CREATE TRIGGER changefeed_capture AFTER INSERT OR DELETE OR UPDATE ON restored FOR EACH ROW
    EXECUTE FUNCTION changefeed.capture_row(:'restored_id', '16', 't', 'f', '1', 'id', '1', 'id', '');
ALTER TABLE restored ENABLE ALWAYS TRIGGER changefeed_capture;
CREATE TRIGGER changefeed_capture_truncate AFTER TRUNCATE ON restored FOR EACH STATEMENT
    EXECUTE FUNCTION changefeed.capture_truncate(:'restored_id', '16', 'f');
ALTER TABLE restored ENABLE ALWAYS TRIGGER changefeed_capture_truncate;
SELECT * FROM verify_masked() WHERE table_name = 'restored'::regclass;
-- A capture trigger created with other arguments is refused.
BEGIN;
SELECT changefeed.suspend_guard(true);
DROP TRIGGER changefeed_capture ON restored;
SELECT changefeed.suspend_guard(false);
SELECT try_detail($$CREATE TRIGGER changefeed_capture AFTER INSERT ON restored FOR EACH ROW
    EXECUTE FUNCTION changefeed.capture_row('$$ || :'restored_id' || $$', '16', 't', 'f', '1', 'id', '1', 'id', '')$$);
ROLLBACK;

-- Dropping an enabled table is allowed (it forgets the collection).
DROP TABLE accounts;
SELECT count(*) AS accounts_collections FROM changefeed.collections WHERE table_name::text LIKE '%accounts%';
DROP TABLE notes, mirrored, coded, restored, tree, base, derived CASCADE;
DROP DOMAIN code;
DROP SCHEMA side;
DROP FUNCTION noop();
REVOKE ALL ON SCHEMA public FROM integrity_owner;
DROP ROLE integrity_owner;
