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

-- The worker also runs maintain(): here its TTL sweep, with a 1 s interval.
CREATE TABLE tokens (id int PRIMARY KEY, expires_at timestamptz NOT NULL);
SELECT changefeed.enable('tokens', ttl_column => 'expires_at') IS NOT NULL;
SELECT start_cursor('tokens');
INSERT INTO tokens VALUES (1, now() - interval '1 minute'), (2, now() + interval '1 day');
ALTER SYSTEM SET changefeed.maintain_interval = 1;
SELECT pg_reload_conf();
DO $$
BEGIN
    FOR i IN 1..300 LOOP
        EXIT WHEN NOT EXISTS (SELECT 1 FROM tokens WHERE id = 1);
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$$;
ALTER SYSTEM RESET changefeed.maintain_interval;
SELECT pg_reload_conf();
SELECT id FROM tokens;
SELECT operation, doc_id, ttl_expired FROM next_changes('tokens', 'tokens');
