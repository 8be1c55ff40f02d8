-- Schema changes of an enabled table: each is a version (capture/schema.sql), in
-- the feed in order with the data for readers that ask (mode
-- 'all_with_schema'), and images written under an older version are judged
-- by column identity: a column-restricted reader never sees a column it may
-- not SELECT today under the name it had, and a policy sees old images under
-- today's names.  Run as a non-superuser owner; roles are dropped at the end.
SET client_min_messages = warning;
CREATE ROLE regress_sc_owner LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_sc_cols LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_sc_policy LOGIN IN ROLE changefeed_reader;
GRANT CREATE ON SCHEMA public TO regress_sc_owner;
RESET client_min_messages;

SET ROLE regress_sc_owner;
CREATE TABLE emp (id int PRIMARY KEY, name text, salary int, ssn text, region text);
GRANT SELECT (id, name) ON emp TO regress_sc_cols;
GRANT SELECT ON emp TO regress_sc_policy;
ALTER TABLE emp ENABLE ROW LEVEL SECURITY;
CREATE POLICY by_region ON emp FOR SELECT TO regress_sc_policy USING (region = 'north');
CREATE POLICY every_row ON emp FOR SELECT TO regress_sc_cols USING (true);
SELECT changefeed.enable('emp', ranges => 1) > 0 AS enabled;
RESET ROLE;
SELECT changefeed.current_position() AS p0 \gset
SET ROLE regress_sc_owner;
INSERT INTO emp VALUES (1, 'ann', 100, '111-11', 'north'), (2, 'bob', 200, '222-22', 'south');
-- An ordinary migration: a column renamed, another dropped, one added; the
-- policy's column renamed too.
ALTER TABLE emp RENAME COLUMN salary TO base_pay;
ALTER TABLE emp DROP COLUMN ssn;
ALTER TABLE emp ADD COLUMN title text;
ALTER TABLE emp RENAME COLUMN region TO area;
INSERT INTO emp VALUES (3, 'cy', 300, 'north', 'cto');
RESET ROLE;

-- The versions: one per command that changed the shape.
SELECT version, jsonb_path_query_array(columns, '$[*].name') AS columns, key
  FROM changefeed.schema_version s JOIN changefeed.collection c ON c.id = s.collection_id
 WHERE c.relid = 'emp'::regclass ORDER BY version;
-- Every log row records the version it was written under.
SELECT op, doc_id, l.schema_version FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id
 WHERE c.relid = 'emp'::regclass ORDER BY seq;

-- The owner reads the history as it was written; schema changes only when asked.
SET ROLE regress_sc_owner;
SELECT operation, doc_id, current FROM changefeed.read('emp', :'p0');
SELECT operation, current - 'columns' AS change
  FROM changefeed.read('emp', :'p0', mode => 'all_with_schema') WHERE operation = 'schema';
SELECT string_agg(operation, ' ' ORDER BY seq) AS in_order
  FROM changefeed.read('emp', :'p0', mode => 'all_with_schema');
-- The latest-version feed has no schema changes.
SELECT operation, doc_id FROM changefeed.read('emp', :'p0', mode => 'latest') ORDER BY doc_id;
SELECT try($$SELECT * FROM changefeed.read('emp', changefeed.current_position(), mode => 'schema')$$);
RESET ROLE;

-- A reader granted (id, name) sees id and name of every change: neither the
-- salary renamed since nor the ssn dropped since, and a filter on them finds
-- nothing.
SET ROLE regress_sc_cols;
SELECT operation, doc_id, current FROM changefeed.read('emp', :'p0');
SELECT count(*) AS salary_probe FROM changefeed.read('emp', :'p0', filter => '$.salary > 150');
SELECT count(*) AS ssn_probe FROM changefeed.read('emp', :'p0', filter => '$.ssn == "222-22"');
SELECT count(*) AS name_filter FROM changefeed.read('emp', :'p0', filter => '$.name == "bob"');
-- Its schema changes name only the columns it may see.
SELECT current -> 'renamed' AS renamed, current -> 'dropped' AS dropped, current -> 'added' AS added,
       jsonb_path_query_array(current, '$.columns[*].name') AS columns
  FROM changefeed.read('emp', :'p0', mode => 'all_with_schema') WHERE operation = 'schema';
RESET ROLE;

-- A reader bound by a policy on a column renamed since: the policy sees the
-- old images under the column's name now, so it gets the north rows only,
-- as its own SELECT would.
SET ROLE regress_sc_policy;
SELECT id FROM emp ORDER BY id;
SELECT operation, doc_id FROM changefeed.read('emp', :'p0') ORDER BY seq;
RESET ROLE;

-- A schema change while capture is off is one version at enable().
SET ROLE regress_sc_owner;
SELECT changefeed.disable('emp');
ALTER TABLE emp ADD COLUMN hired date;
SELECT changefeed.enable('emp', ranges => 1) > 0 AS enabled;
RESET ROLE;
SELECT max(version) AS versions FROM changefeed.schema_version s JOIN changefeed.collection c ON c.id = s.collection_id
 WHERE c.relid = 'emp'::regclass;

-- A row logged without a version (its writer could not look the version up:
-- the catalog was locked) is of the last version whose schema change came
-- before it in the log, not of the first.
SET ROLE regress_sc_owner;
CREATE TABLE sc_late (id int PRIMARY KEY, name text, secret text);
GRANT SELECT (id, name) ON sc_late TO regress_sc_cols;
SELECT changefeed.enable('sc_late', ranges => 1) > 0 AS enabled;
SELECT changefeed.current_position() AS late0 \gset
INSERT INTO sc_late VALUES (1, 'one', 's1');
ALTER TABLE sc_late RENAME COLUMN name TO full_name;
INSERT INTO sc_late VALUES (2, 'two', 's2');
ALTER TABLE sc_late RENAME COLUMN secret TO name;   -- a hidden column takes the old name
INSERT INTO sc_late VALUES (3, 'three', 's3');
RESET ROLE;
UPDATE changefeed.log l SET schema_version = NULL FROM changefeed.collection c
 WHERE c.id = l.collection_id AND c.relid = 'sc_late'::regclass AND l.op = 'c';
SET ROLE regress_sc_cols;
SELECT doc_id, current FROM changefeed.read('sc_late', :'late0') WHERE operation = 'create' ORDER BY seq;
RESET ROLE;
SELECT changefeed.disable('sc_late', forget => true);

-- Clean up (roles are cluster-wide).
SELECT changefeed.disable('emp', forget => true);
SELECT count(*) AS versions_left FROM changefeed.schema_version
 WHERE collection_id NOT IN (SELECT id FROM changefeed.collection);
SET client_min_messages = warning;
DROP OWNED BY regress_sc_owner, regress_sc_cols, regress_sc_policy CASCADE;
DROP ROLE regress_sc_owner, regress_sc_cols, regress_sc_policy;
RESET client_min_messages;
