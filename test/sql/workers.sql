-- The workers of a database: a notifier and a maintainer, started together;
-- DROP DATABASE stops them only when the drop is allowed.
\set SHOW_CONTEXT never
-- Settings given in postgresql.conf are honoured (the test run starts this
-- cluster with changefeed.maintain_interval = 0 there).
SELECT current_setting('changefeed.maintain_interval') AS maintain_interval;
\set regress_db :DBNAME
CREATE DATABASE regress_cf_other;
\c regress_cf_other
SET client_min_messages = warning;
CREATE EXTENSION changefeed;
CREATE TABLE t (id int PRIMARY KEY);
SELECT changefeed.enable('t') IS NOT NULL;
INSERT INTO t VALUES (1);
\c :regress_db
DO $$
BEGIN
    FOR i IN 1..200 LOOP
        EXIT WHEN (SELECT count(*) FROM pg_stat_activity
                    WHERE datname = 'regress_cf_other' AND backend_type LIKE 'changefeed %') = 2;
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;
CREATE TABLE other_workers AS
SELECT pid, backend_type FROM pg_stat_activity WHERE datname = 'regress_cf_other' AND backend_type LIKE 'changefeed %';
SELECT backend_type FROM other_workers ORDER BY 1;

-- A role that may not drop the database: refused, and the workers run on.
CREATE ROLE regress_cf_nobody;
SET ROLE regress_cf_nobody;
DROP DATABASE regress_cf_other;
RESET ROLE;
-- Nor inside a transaction block.
BEGIN;
DROP DATABASE regress_cf_other;
ROLLBACK;
SELECT count(*) AS still_running FROM other_workers o JOIN pg_stat_activity a USING (pid, backend_type);

-- The owner's DROP DATABASE stops them and succeeds.
DROP DATABASE regress_cf_other;
SELECT count(*) AS left_running FROM other_workers o JOIN pg_stat_activity a USING (pid);
DROP TABLE other_workers;
DROP ROLE regress_cf_nobody;
