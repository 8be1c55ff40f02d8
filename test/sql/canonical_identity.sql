-- Canonical document identity: doc_id, partition_key, range and tenant are
-- the values' text under fixed settings (TimeZone UTC, DateStyle ISO,
-- IntervalStyle postgres, extra_float_digits 1, bytea_output hex), whatever
-- the session that writes, deletes, backfills, expires or reads them.
-- Tried as a non-superuser table owner.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE ROLE regress_ci_owner LOGIN IN ROLE changefeed_processor;
GRANT CREATE ON SCHEMA public TO regress_ci_owner;
RESET client_min_messages;
SET ROLE regress_ci_owner;

-- The changes of a table as read() delivers them (all versions), oldest first.
CREATE TABLE ci_start AS SELECT changefeed.current_position() AS pos;
CREATE FUNCTION ci_log(tbl regclass)
RETURNS TABLE (op text, doc_id text, partition_key text, range_id int, tenant text, ttl_expired bool)
LANGUAGE sql AS $$
    SELECT r.operation, r.doc_id, r.partition_key, r.range_id, r.tenant, r.ttl_expired
      FROM changefeed.read(tbl, (SELECT pos FROM ci_start), 1000) r ORDER BY r.seq
$$;
-- One line per table: how many ids its changes carry (1 = one document).
CREATE FUNCTION ci_ids(tbl regclass)
RETURNS TABLE (changes bigint, doc_ids bigint, partition_keys bigint, ranges bigint, tenants bigint)
LANGUAGE sql AS $$
    SELECT count(*), count(DISTINCT doc_id), count(DISTINCT partition_key), count(DISTINCT range_id),
           count(DISTINCT tenant)
      FROM ci_log(tbl)
$$;

-- The function SQL uses: the session's settings do not show in its text,
-- and they are the session's again afterwards.
SET TimeZone = 'Asia/Kolkata';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = 0;
SET bytea_output = 'escape';
SELECT changefeed.canonical_text('2026-03-04 10:00:00+05:30'::timestamptz) AS tstz,
       changefeed.canonical_text('2026-03-04 10:00:00'::timestamp) AS ts,
       changefeed.canonical_text('2026-03-04'::date) AS d,
       changefeed.canonical_text('-1 day +02:03:04.5'::interval) AS i,
       changefeed.canonical_text(0.1::float8 + 0.2::float8) AS f8,
       changefeed.canonical_text(0.1::float4) AS f4,
       changefeed.canonical_text('\x00ff41'::bytea) AS b;
SELECT changefeed.canonical_text(ARRAY['2026-03-04 10:00:00+05:30'::timestamptz, NULL]) AS arr,
       changefeed.canonical_text(ROW('2026-03-04'::date, 0.3::float8, '\x41'::bytea)) AS rec,
       changefeed.canonical_text(NULL::date) IS NULL AS strict;
SELECT '2026-03-04 10:00:00+05:30'::timestamptz::text AS session_tstz, '2026-03-04'::date::text AS session_date,
       '1 day 02:00:00'::interval::text AS session_interval, (0.1::float8 + 0.2::float8)::text AS session_float,
       '\x00ff41'::bytea::text AS session_bytea;
RESET ALL;

-- timestamptz key: created under Asia/Kolkata, replaced under UTC, deleted
-- under America/New_York: one document, one partition key, one range.
CREATE TABLE ci_tstz (at timestamptz PRIMARY KEY, v int);
SELECT changefeed.enable('ci_tstz', ranges => 16) IS NOT NULL AS enabled;
SET TimeZone = 'Asia/Kolkata';
INSERT INTO ci_tstz VALUES ('2026-03-04 10:00:00+05:30', 1), ('2026-03-05 23:30:00+05:30', 1);
SET TimeZone = 'UTC';
UPDATE ci_tstz SET v = 2;
SET TimeZone = 'America/New_York';
DELETE FROM ci_tstz;
RESET TimeZone;
SELECT op, doc_id, partition_key, range_id FROM ci_log('ci_tstz');
SELECT * FROM ci_ids('ci_tstz');  -- two documents
SELECT bool_and(range_id = changefeed.range_of(partition_key, 16)) AS ranges_documented FROM ci_log('ci_tstz');

-- date key: DateStyle 'SQL, DMY' then ISO.
CREATE TABLE ci_date (d date PRIMARY KEY, v int);
SELECT changefeed.enable('ci_date') IS NOT NULL AS enabled;
SET DateStyle = 'SQL, DMY';
INSERT INTO ci_date VALUES ('2026-03-04', 1);
SET DateStyle = 'ISO';
DELETE FROM ci_date;
RESET DateStyle;
SELECT op, doc_id, partition_key FROM ci_log('ci_date');
SELECT * FROM ci_ids('ci_date');

-- interval key: IntervalStyle sql_standard then postgres.
CREATE TABLE ci_interval (i interval PRIMARY KEY, v int);
SELECT changefeed.enable('ci_interval') IS NOT NULL AS enabled;
SET IntervalStyle = 'sql_standard';
INSERT INTO ci_interval VALUES ('1 day 02:03:04'), ('-1 day +02:00:00');
RESET IntervalStyle;
DELETE FROM ci_interval;
SELECT op, doc_id FROM ci_log('ci_interval');
-- Two documents, each created and deleted under one id.
SELECT count(*) AS changes, count(DISTINCT doc_id) AS doc_ids FROM ci_log('ci_interval');

-- float8 key: extra_float_digits 0 (rounded to 15 digits) then 3.
CREATE TABLE ci_float (f float8 PRIMARY KEY, v int);
SELECT changefeed.enable('ci_float') IS NOT NULL AS enabled;
SET extra_float_digits = 0;
INSERT INTO ci_float VALUES (0.1::float8 + 0.2::float8), (0.3);
SET extra_float_digits = 3;
DELETE FROM ci_float;
RESET extra_float_digits;
SELECT op, doc_id FROM ci_log('ci_float');
-- Two documents (0.30000000000000004 and 0.3), each created and deleted under one id.
SELECT count(*) AS changes, count(DISTINCT doc_id) AS doc_ids FROM ci_log('ci_float');

-- bytea key: bytea_output escape then hex.
CREATE TABLE ci_bytea (b bytea PRIMARY KEY, v int);
SELECT changefeed.enable('ci_bytea') IS NOT NULL AS enabled;
SET bytea_output = 'escape';
INSERT INTO ci_bytea VALUES ('\x00ff41');
RESET bytea_output;
DELETE FROM ci_bytea;
SELECT op, doc_id FROM ci_log('ci_bytea');
SELECT * FROM ci_ids('ci_bytea');

-- A composite key mixing them (a composite-typed column, an array, an inet),
-- a partition key of two of them and a date tenant: written under one set of
-- settings, deleted under another.
CREATE TYPE ci_pair AS (at timestamptz, f float8);
CREATE TABLE ci_mixed (
    at timestamptz, d date, pair ci_pair, spans interval[], b bytea, addr inet,
    day date, v int,
    PRIMARY KEY (at, d, pair, spans, b, addr));
SELECT changefeed.enable('ci_mixed', partition_key => ARRAY['at', 'spans'], tenant_column => 'day',
                         ranges => 8) IS NOT NULL AS enabled;
SELECT changefeed.current_position() AS mixed_start \gset
SET TimeZone = 'Asia/Kolkata';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = 0;
SET bytea_output = 'escape';
INSERT INTO ci_mixed VALUES ('2026-03-04 10:00:00+05:30', '2026-03-04', ROW('2026-03-04 10:00:00+05:30', 0.1 + 0.2),
                             ARRAY['1 day 02:03:04'::interval, '-1 day +02:00:00'], '\x00ff41', '10.0.0.1/32',
                             '2026-03-04', 1);
-- Capture left the session's settings as they were.
SELECT '2026-03-04 10:00:00+05:30'::timestamptz::text AS tstz, '2026-03-04'::date::text AS d,
       '-1 day +02:00:00'::interval::text AS i, 0.30000000000000004::float8::text AS f, '\x00ff41'::bytea::text AS b;
RESET ALL;  -- (not the role)
SET TimeZone = 'America/New_York';
SET extra_float_digits = 3;
UPDATE ci_mixed SET v = 2;
RESET ALL;  -- (not the role)
DELETE FROM ci_mixed;
SELECT op, doc_id, partition_key, tenant FROM ci_log('ci_mixed');
SELECT * FROM ci_ids('ci_mixed');
-- A tenant-scoped read names the tenant by its canonical text.
SELECT count(*) AS tenant_changes
  FROM changefeed.read('ci_mixed', :'mixed_start', tenant => '2026-03-04');

-- Backfill (the scan start_from_beginning runs) under another session's
-- settings yields the document ids, partition keys and ranges capture logs.
SET TimeZone = 'Asia/Kolkata';
SET DateStyle = 'SQL, DMY';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = 0;
SET bytea_output = 'escape';
INSERT INTO ci_tstz VALUES ('2026-03-04 10:00:00+05:30', 3), ('2026-03-05 23:30:00+05:30', 3);
INSERT INTO ci_mixed VALUES ('2026-03-04 10:00:00+05:30', '2026-03-04', ROW('2026-03-04 10:00:00+05:30', 0.1 + 0.2),
                             ARRAY['1 day 02:03:04'::interval, '-1 day +02:00:00'], '\x00ff41', '10.0.0.1/32',
                             '2026-03-04', 3);
RESET ALL;  -- (not the role)
SET TimeZone = 'America/New_York';
SET DateStyle = 'ISO, MDY';
SET extra_float_digits = 3;
CREATE FUNCTION ci_backfill(tbl regclass, ranges int)
RETURNS TABLE (range_id int, doc_id text, partition_key text) LANGUAGE sql AS $$
    SELECT r, b.doc_id, b.partition_key
      FROM generate_series(0, ranges - 1) r, changefeed.backfill_page(tbl, r, NULL) b
$$;
SELECT b.doc_id, b.partition_key, b.range_id,
       EXISTS (SELECT 1 FROM ci_log('ci_tstz') l
                WHERE l.op = 'create' AND (l.doc_id, l.partition_key, l.range_id) = (b.doc_id, b.partition_key, b.range_id))
           AS as_logged
  FROM ci_backfill('ci_tstz', 16) b ORDER BY 1;
SELECT b.doc_id, b.partition_key, b.range_id,
       EXISTS (SELECT 1 FROM ci_log('ci_mixed') l
                WHERE l.op = 'create' AND (l.doc_id, l.partition_key, l.range_id) = (b.doc_id, b.partition_key, b.range_id))
           AS as_logged
  FROM ci_backfill('ci_mixed', 8) b;
RESET ALL;  -- (not the role)

-- images => 'keys': the latest-version feed looks each document up by its
-- id, whatever the reading session's settings.
CREATE TABLE ci_keys (at timestamptz PRIMARY KEY, d date NOT NULL, v int);
SELECT changefeed.enable('ci_keys', images => 'keys', keep_previous => false) IS NOT NULL AS enabled;
SELECT changefeed.current_position() AS keys_start \gset
SET TimeZone = 'Asia/Kolkata';
SET DateStyle = 'SQL, DMY';
INSERT INTO ci_keys VALUES ('2026-03-04 10:00:00+05:30', '2026-03-04', 1), ('2026-12-01 08:00:00+05:30', '2026-12-01', 2);
RESET ALL;  -- (not the role)
SET TimeZone = 'America/New_York';
SET DateStyle = 'Postgres, MDY';
SET IntervalStyle = 'sql_standard';
SELECT operation, doc_id, current->>'v' AS v FROM changefeed.read('ci_keys', :'keys_start', mode => 'latest')
 ORDER BY doc_id;
RESET ALL;  -- (not the role)

-- The TTL sweep (maintain(), here under another TimeZone) deletes through
-- capture: its deletes carry the ids the creates did.
CREATE TABLE ci_ttl (at timestamptz PRIMARY KEY, expires_at timestamptz NOT NULL);
SELECT changefeed.enable('ci_ttl', ttl_column => 'expires_at') IS NOT NULL AS enabled;
SET TimeZone = 'Asia/Kolkata';
INSERT INTO ci_ttl VALUES ('2026-03-04 10:00:00+05:30', now() - interval '1 day');
SET TimeZone = 'America/New_York';
SELECT ttl_deleted >= 1 AS swept FROM changefeed.maintain();
RESET TimeZone;
SELECT op, doc_id, ttl_expired FROM ci_log('ci_ttl');
SELECT * FROM ci_ids('ci_ttl');

-- Partition expiry (partition_drops => 'expire') renders the ids itself.
CREATE TABLE ci_parted (at timestamptz, id int, PRIMARY KEY (at, id)) PARTITION BY RANGE (at);
CREATE TABLE ci_parted_march PARTITION OF ci_parted FOR VALUES FROM ('2026-03-01 00:00+00') TO ('2026-04-01 00:00+00');
SELECT changefeed.enable('ci_parted', partition_key => ARRAY['at'], partition_drops => 'expire')
       IS NOT NULL AS enabled;
SET TimeZone = 'Asia/Kolkata';
INSERT INTO ci_parted VALUES ('2026-03-04 10:00:00+05:30', 1);
SET TimeZone = 'America/New_York';
SET DateStyle = 'SQL, DMY';
DROP TABLE ci_parted_march;
RESET ALL;  -- (not the role)
SELECT op, doc_id, partition_key, ttl_expired FROM ci_log('ci_parted');
SELECT * FROM ci_ids('ci_parted');

-- Types whose text no setting of ours fixes (money: lc_monetary; reg*:
-- search_path) are refused as key, partition-key or tenant columns.
CREATE TABLE ci_money (m money PRIMARY KEY);
CREATE TABLE ci_money_tenant (id int PRIMARY KEY, price money, who regclass);
CREATE DOMAIN ci_cash AS money;
CREATE TABLE ci_money_array (m ci_cash[] PRIMARY KEY);
SELECT try($$SELECT changefeed.enable('ci_money')$$);
SELECT try($$SELECT changefeed.enable('ci_money_tenant', tenant_column => 'price')$$);
SELECT try($$SELECT changefeed.enable('ci_money_tenant', partition_key => ARRAY['who'])$$);
SELECT try($$SELECT changefeed.enable('ci_money_array')$$);
SELECT changefeed.enable('ci_money_tenant') IS NOT NULL AS other_columns_may_be_money;

RESET ROLE;
SET client_min_messages = warning;
SELECT changefeed.disable(c.relid, forget => true) FROM changefeed.collection c
 WHERE c.relid::text LIKE 'ci\_%' ORDER BY c.id;
DROP OWNED BY regress_ci_owner;
DROP ROLE regress_ci_owner;
RESET client_min_messages;
