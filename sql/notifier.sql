-- The preloaded wake-up: a background worker per database, not the writers.
\set SHOW_CONTEXT never
SELECT changefeed.preloaded();
CREATE TABLE pings (id int PRIMARY KEY);
SELECT changefeed.enable('pings') IS NOT NULL;
INSERT INTO pings VALUES (1);
DO $$
BEGIN
    FOR i IN 1..200 LOOP
        EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity
                           WHERE backend_type = 'changefeed notifier' AND datname = current_database());
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;
SELECT count(*) AS notifiers FROM pg_stat_activity
 WHERE backend_type = 'changefeed notifier' AND datname = current_database();
SELECT changefeed.ensure_notifier();
-- Still one after more writes.
INSERT INTO pings VALUES (2), (3);
SELECT count(*) AS notifiers FROM pg_stat_activity
 WHERE backend_type = 'changefeed notifier' AND datname = current_database();
