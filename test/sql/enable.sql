-- Enabling and disabling capture; every bad input has its own error.
\set SHOW_CONTEXT never
CREATE TABLE users (id int PRIMARY KEY, name text, tenant text, expires timestamptz);
SELECT changefeed.enable('users');
-- Same options again: idempotent, same collection id.
SELECT changefeed.enable('users');
-- Other options on an enabled table.
SELECT changefeed.enable('users', ranges => 8);
SELECT try($$SELECT changefeed.enable('users', ranges => 8)$$);

-- No primary key.
CREATE TABLE no_key (a int, b text);
SELECT changefeed.enable('no_key');
SELECT try($$SELECT changefeed.enable('no_key')$$);
-- A missing table, a view, a sequence.
SELECT changefeed.enable('missing_table');
CREATE VIEW users_view AS SELECT * FROM users;
SELECT try($$SELECT changefeed.enable('users_view')$$);
CREATE SEQUENCE some_seq;
SELECT try($$SELECT changefeed.enable('some_seq')$$);
SELECT try($$SELECT changefeed.enable(NULL)$$);

-- Bad option values.
CREATE TABLE opts (id int PRIMARY KEY, region text, at timestamptz, label text);
SELECT try($$SELECT changefeed.enable('opts', ranges => 0)$$);
SELECT try($$SELECT changefeed.enable('opts', ranges => 5000)$$);
SELECT try($$SELECT changefeed.enable('opts', retention => '-1 day')$$);
SELECT try($$SELECT changefeed.enable('opts', retention => NULL)$$);
SELECT try($$SELECT changefeed.enable('opts', keep_previous => NULL)$$);
SELECT try($$SELECT changefeed.enable('opts', partition_key => '{}')$$);
SELECT try($$SELECT changefeed.enable('opts', partition_key => '{nope}')$$);
SELECT try($$SELECT changefeed.enable('opts', tenant_column => 'nope')$$);
SELECT try($$SELECT changefeed.enable('opts', ttl_column => 'nope')$$);
SELECT try($$SELECT changefeed.enable('opts', ttl_column => 'label')$$);
-- Nothing was enabled by the failed attempts.
SELECT count(*) FROM changefeed.collections WHERE table_name = 'opts'::regclass;
SELECT changefeed.enable('opts', partition_key => '{region}', ranges => 4, retention => '2 days',
                         keep_previous => false, tenant_column => 'label', ttl_column => 'at');

-- Identifiers that need quoting.
CREATE SCHEMA "My Schema";
CREATE TABLE "My Schema"."Odd ""Table""" ("Id" int PRIMARY KEY, "Value" text);
SELECT changefeed.enable('"My Schema"."Odd ""Table"""');

SELECT id, table_name, key_columns, partition_key, ranges, retention, keep_previous,
       tenant_column, ttl_column, channel
  FROM changefeed.collections ORDER BY id;
SELECT tgname, tgrelid::regclass FROM pg_trigger WHERE tgname LIKE 'changefeed%' ORDER BY 2, 1;

-- Disable (the collection is kept, disabled; disabling again changes nothing).
SELECT changefeed.disable('opts');
SELECT try($$SELECT changefeed.disable('opts')$$);
SELECT changefeed.disable('no_key');
SELECT count(*) FROM pg_trigger WHERE tgrelid = 'opts'::regclass AND tgname LIKE 'changefeed%';
-- Reading a table that is not enabled.
SELECT try($$SELECT * FROM changefeed.read('opts', changefeed.current_position())$$);
-- Dropping an enabled table forgets its collection.
CREATE TABLE short_lived (id int PRIMARY KEY);
SELECT changefeed.enable('short_lived') IS NOT NULL;
DROP TABLE short_lived;
SELECT count(*) FROM changefeed.collections WHERE table_name::text = 'short_lived';
SELECT count(*) FROM changefeed.collection c WHERE NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = c.relid);
