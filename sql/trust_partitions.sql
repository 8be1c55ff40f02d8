-- Partitions under roles that are not superusers: the partition guards
-- resolve a command's names as the command does (a per-user schema shadowing
-- public), partition expiry reads every row whatever the partition's
-- row-level security, and table owners run their partitions' life cycle.
\set SHOW_CONTEXT never
CREATE FUNCTION try_tp(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM, '(collection )[0-9]+', '\1N', 'g');
END
$$;
GRANT EXECUTE ON FUNCTION try_tp(text) TO PUBLIC;
-- Expired deletes logged for an enabled table (the log, read for the roles).
CREATE FUNCTION expired_of(tbl regclass) RETURNS bigint LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp AS $$
    SELECT count(*) FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id
     WHERE c.relid = tbl AND l.ttl_expired
$$;

-- ---- a per-user schema shadowing public ----
-- The pattern PostgreSQL's docs recommend: a role's own schema first on the
-- default search_path ("$user", public).  Every table is the role's own.
CREATE ROLE regress_tp_app IN ROLE changefeed_reader;
GRANT CREATE ON SCHEMA public TO regress_tp_app;
CREATE SCHEMA regress_tp_app AUTHORIZATION regress_tp_app;
SHOW search_path;
SET ROLE regress_tp_app;
CREATE TABLE public.tp_orders (id int PRIMARY KEY, note text) PARTITION BY RANGE (id);
CREATE TABLE regress_tp_app.tp_orders (id int PRIMARY KEY, note text) PARTITION BY RANGE (id);
DO $$
BEGIN
    FOR i IN 1..5 LOOP
        EXECUTE format('CREATE TABLE public.tp_orders_%s PARTITION OF public.tp_orders FOR VALUES FROM (%s) TO (%s)',
                       i, i * 10, i * 10 + 10);
        EXECUTE format('CREATE TABLE regress_tp_app.tp_orders_%s PARTITION OF regress_tp_app.tp_orders '
                       'FOR VALUES FROM (%s) TO (%s)', i, i * 10, i * 10 + 10);
    END LOOP;
END
$$;
INSERT INTO public.tp_orders SELECT i * 10 + j, 'public' FROM generate_series(1, 5) i, generate_series(0, 1) j;
INSERT INTO regress_tp_app.tp_orders SELECT i * 10 + j, 'app' FROM generate_series(1, 5) i, generate_series(0, 1) j;
SELECT changefeed.enable('public.tp_orders', partition_drops => 'expire') IS NOT NULL AS public_enabled;
-- The unqualified name is the role's own table.
SELECT relnamespace::regnamespace AS resolved_in FROM pg_class WHERE oid = 'tp_orders'::regclass;

-- The role's own tree is not enabled: its DDL concerns no collection.  None
-- of it may expire, unguard or refuse anything of public.tp_orders.
SELECT try_tp('ALTER TABLE tp_orders ALTER COLUMN note TYPE int USING length(note)');
SELECT try_tp('DROP TABLE tp_orders_1');
SELECT try_tp('ALTER TABLE tp_orders DETACH PARTITION tp_orders_2');
SELECT expired_of('public.tp_orders') AS public_expired,
       (SELECT count(*) FROM public.tp_orders_1) AS public_1_rows,
       (SELECT count(*) FROM public.tp_orders_2) AS public_2_rows;
-- public.tp_orders_2 keeps its TRUNCATE guard.
SELECT try_tp('TRUNCATE public.tp_orders_2');
SELECT to_regclass('regress_tp_app.tp_orders_1') AS app_1_dropped,
       (SELECT count(*) FROM regress_tp_app.tp_orders_2) AS app_2_detached_rows;
SELECT try_tp('ALTER TABLE tp_orders ALTER COLUMN note TYPE text');

-- Enabled too: the role's DDL expires the role's partitions, never public's.
SELECT changefeed.enable('tp_orders', partition_drops => 'expire') IS NOT NULL AS app_enabled;
SELECT try_tp('DROP TABLE tp_orders_3');
SELECT try_tp('ALTER TABLE tp_orders DETACH PARTITION tp_orders_4');
SELECT expired_of('regress_tp_app.tp_orders') AS app_expired, expired_of('public.tp_orders') AS public_expired,
       (SELECT count(*) FROM public.tp_orders_3) AS public_3_rows,
       (SELECT count(*) FROM public.tp_orders_4) AS public_4_rows;
-- The detached partition lost its guard, public's namesake kept its own.
SELECT tgname FROM pg_trigger WHERE tgrelid = 'regress_tp_app.tp_orders_4'::regclass;
SELECT try_tp('TRUNCATE tp_orders_4');
SELECT try_tp('TRUNCATE public.tp_orders_4');
SELECT try_tp('TRUNCATE tp_orders_5');
SELECT try_tp('ALTER TABLE tp_orders ALTER COLUMN note TYPE int USING length(note)');
RESET ROLE;
SELECT count(*) AS app_5_rows FROM regress_tp_app.tp_orders_5;
SELECT table_name, intact FROM changefeed.verify() WHERE table_name::text LIKE '%tp\_orders' ORDER BY 1::text;

-- ---- partition expiry reads every row ----
-- Forced row-level security binds the owner, who reads the partition for the
-- expiry: a policy that hides rows refuses the drop instead of hiding them.
SET ROLE regress_tp_app;
CREATE TABLE tp_secret (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE tp_secret_1 PARTITION OF tp_secret FOR VALUES FROM (0) TO (10);
CREATE TABLE tp_secret_2 PARTITION OF tp_secret FOR VALUES FROM (10) TO (20);
INSERT INTO tp_secret SELECT generate_series(1, 5);
SELECT changefeed.enable('tp_secret', partition_drops => 'expire') IS NOT NULL AS enabled;
ALTER TABLE tp_secret_1 ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tp_hide ON tp_secret_1 USING (false);
SELECT count(*) AS rows_the_owner_sees FROM tp_secret_1;
SELECT try_tp('DROP TABLE tp_secret_1');
SELECT try_tp('ALTER TABLE tp_secret DETACH PARTITION tp_secret_1');
SELECT expired_of('tp_secret') AS expired, to_regclass('tp_secret_1') IS NOT NULL AS still_there;
-- Not forced, the owner reads every row: all five are expired.
ALTER TABLE tp_secret_1 NO FORCE ROW LEVEL SECURITY;
SELECT try_tp('DROP TABLE tp_secret_1');
SELECT expired_of('tp_secret') AS expired;
RESET ROLE;

-- ---- clean up ----
DROP TABLE public.tp_orders, regress_tp_app.tp_orders, regress_tp_app.tp_secret, regress_tp_app.tp_orders_2, regress_tp_app.tp_orders_4;
DROP SCHEMA regress_tp_app;
REVOKE CREATE ON SCHEMA public FROM regress_tp_app;
DROP ROLE regress_tp_app;
