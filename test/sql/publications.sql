-- Publications that would ship the extension's own tables are refused
-- (CF024): FOR ALL TABLES, the schema changefeed, one of its tables, also
-- when added later.  The application's tables by schema or by name are fine.
\set SHOW_CONTEXT never
SET client_min_messages = error;  -- no wal_level warning: it differs between clusters
CREATE SCHEMA pub_app;
CREATE TABLE pub_app.orders (id int PRIMARY KEY);
SELECT changefeed.enable('pub_app.orders') IS NOT NULL AS enabled;
SELECT try($$CREATE PUBLICATION pub_all FOR ALL TABLES$$);
SELECT try($$CREATE PUBLICATION pub_ours FOR TABLES IN SCHEMA changefeed$$);
SELECT try($$CREATE PUBLICATION pub_lease FOR TABLE changefeed.lease$$);
SELECT try($$CREATE PUBLICATION pub_mixed FOR TABLES IN SCHEMA pub_app, changefeed$$);
SELECT count(*) AS refused_left_nothing FROM pg_publication WHERE pubname LIKE 'pub\_%';
CREATE PUBLICATION pub_by_schema FOR TABLES IN SCHEMA pub_app;
CREATE PUBLICATION pub_by_name FOR TABLE pub_app.orders;
SELECT try($$ALTER PUBLICATION pub_by_schema ADD TABLES IN SCHEMA changefeed$$);
SELECT try($$ALTER PUBLICATION pub_by_name ADD TABLE changefeed.collection$$);
SELECT try($$ALTER PUBLICATION pub_by_name SET TABLE changefeed.log$$);
SELECT pubname, (SELECT count(*) FROM pg_publication_tables t WHERE t.pubname = p.pubname AND t.schemaname = 'changefeed') AS ours
  FROM pg_publication p WHERE pubname LIKE 'pub\_%' ORDER BY 1;
-- The error as a DBA reads it.
CREATE PUBLICATION pub_all FOR ALL TABLES;
-- A superuser who ships them knowingly turns the guard off.
SET changefeed.publication_guard = off;
CREATE PUBLICATION pub_all FOR ALL TABLES;
SELECT pubname, puballtables FROM pg_publication WHERE pubname = 'pub_all';
RESET changefeed.publication_guard;
DROP PUBLICATION pub_all;
DROP PUBLICATION pub_by_schema, pub_by_name;
DROP TABLE pub_app.orders;
DROP SCHEMA pub_app;
RESET client_min_messages;
