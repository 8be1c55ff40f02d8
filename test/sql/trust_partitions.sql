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
-- (Names qualified here and below: each part stands apart from the first.)
SET ROLE regress_tp_app;
CREATE TABLE tp_secret (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE tp_secret_1 PARTITION OF tp_secret FOR VALUES FROM (0) TO (10);
CREATE TABLE tp_secret_2 PARTITION OF tp_secret FOR VALUES FROM (10) TO (20);
INSERT INTO tp_secret SELECT generate_series(1, 5);
SELECT changefeed.enable('tp_secret', partition_drops => 'expire') IS NOT NULL AS enabled;
ALTER TABLE tp_secret_1 ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
CREATE POLICY tp_hide ON tp_secret_1 USING (false);
SELECT count(*) AS rows_the_owner_sees FROM tp_secret_1;
SELECT try_tp('DROP TABLE regress_tp_app.tp_secret_1');
SELECT try_tp('ALTER TABLE regress_tp_app.tp_secret DETACH PARTITION regress_tp_app.tp_secret_1');
SELECT expired_of('tp_secret') AS expired, to_regclass('tp_secret_1') IS NOT NULL AS still_there;
-- Not forced, the owner reads every row: all five are expired.
ALTER TABLE tp_secret_1 NO FORCE ROW LEVEL SECURITY;
SELECT try_tp('DROP TABLE regress_tp_app.tp_secret_1');
SELECT expired_of('tp_secret') AS expired;
RESET ROLE;

-- ---- owners run their partitions ----
-- A partition created or attached under an enabled table gets a clone of the
-- capture trigger, made with the rights of the role that runs the DDL.
SET ROLE regress_tp_app;
CREATE TABLE tp_rotated (day int, id int, PRIMARY KEY (day, id)) PARTITION BY RANGE (day);
CREATE TABLE tp_rotated_1 PARTITION OF tp_rotated FOR VALUES FROM (1) TO (2);
SELECT changefeed.enable('tp_rotated', partition_drops => 'expire') IS NOT NULL AS enabled;
SELECT changefeed.current_position() AS rotated_start \gset
INSERT INTO tp_rotated VALUES (1, 1);
SELECT try_tp('CREATE TABLE tp_rotated_2 PARTITION OF tp_rotated FOR VALUES FROM (2) TO (3)');
CREATE TABLE tp_rotated_3 (day int NOT NULL, id int NOT NULL);
-- Not a partition yet: PostgreSQL's own error.
SELECT try_tp('ALTER TABLE regress_tp_app.tp_rotated DETACH PARTITION regress_tp_app.tp_rotated_3');
SELECT try_tp('ALTER TABLE tp_rotated ATTACH PARTITION tp_rotated_3 FOR VALUES FROM (3) TO (4)');
INSERT INTO tp_rotated VALUES (2, 1), (3, 1);
SELECT p.relid AS partition, regexp_replace(t.tgname, '[0-9]+$', 'N') AS trigger
  FROM pg_partition_tree('tp_rotated') p JOIN pg_trigger t ON t.tgrelid = p.relid ORDER BY p.relid::text, 2;
SELECT try_tp('ALTER TABLE regress_tp_app.tp_rotated DETACH PARTITION regress_tp_app.tp_rotated_2');
SELECT try_tp('DROP TABLE regress_tp_app.tp_rotated_1');
SELECT changefeed.alter('tp_rotated', partition_drops => 'forget') IS NOT NULL AS altered;
SELECT try_tp('ALTER TABLE regress_tp_app.tp_rotated DETACH PARTITION regress_tp_app.tp_rotated_3');
SELECT try_tp('DROP TABLE regress_tp_app.tp_rotated_2, regress_tp_app.tp_rotated_3');
SELECT operation, doc_id, ttl_expired FROM changefeed.read('tp_rotated', :'rotated_start') ORDER BY seq;
RESET ROLE;
SELECT intact FROM changefeed.verify() WHERE table_name = 'regress_tp_app.tp_rotated'::regclass;

-- An owner outside the extension's roles, whose table an admin enabled.
CREATE ROLE regress_tp_plain;
GRANT CREATE ON SCHEMA public TO regress_tp_plain;
CREATE TABLE tp_plain (day int, id int, PRIMARY KEY (day, id)) PARTITION BY RANGE (day);
ALTER TABLE tp_plain OWNER TO regress_tp_plain;
SELECT changefeed.enable('tp_plain') IS NOT NULL AS enabled;
SELECT changefeed.current_position() AS plain_start \gset
SET ROLE regress_tp_plain;
SELECT try_tp('CREATE TABLE tp_plain_1 PARTITION OF tp_plain FOR VALUES FROM (1) TO (2)');
INSERT INTO tp_plain VALUES (1, 7);
RESET ROLE;
SELECT operation, doc_id FROM changefeed.read('tp_plain', :'plain_start') ORDER BY seq;

-- Nobody files changes under another table's collection with capture_row():
-- the guard refuses the trigger, and capture refuses to fire as one.
SELECT id AS orders_id FROM changefeed.collection WHERE relid = 'public.tp_orders'::regclass \gset
SET ROLE regress_tp_app;
CREATE TABLE tp_forge (id int PRIMARY KEY);
SELECT try_tp(format($$CREATE TRIGGER changefeed_capture AFTER INSERT OR UPDATE OR DELETE ON tp_forge FOR EACH ROW
                       EXECUTE FUNCTION changefeed.capture_row(%s, '16', 't', 'f', '1', 'id', '1', 'id', '')$$,
                     :orders_id));
RESET ROLE;
BEGIN;
SELECT changefeed.suspend_guard(true);
CREATE TRIGGER changefeed_capture AFTER INSERT ON regress_tp_app.tp_forge FOR EACH ROW
    EXECUTE FUNCTION changefeed.capture_row(:'orders_id', '16', 't', 'f', '1', 'id', '1', 'id', '');
COMMIT;
SET ROLE regress_tp_app;
SELECT try_tp('INSERT INTO tp_forge VALUES (1)');
RESET ROLE;
SELECT count(*) AS forged FROM changefeed.log WHERE collection_id = :orders_id AND NOT ttl_expired;

-- ---- clean up ----
DROP TABLE tp_plain, regress_tp_app.tp_forge, regress_tp_app.tp_rotated;
REVOKE CREATE ON SCHEMA public FROM regress_tp_plain;
DROP ROLE regress_tp_plain;
DROP TABLE public.tp_orders, regress_tp_app.tp_orders, regress_tp_app.tp_secret, regress_tp_app.tp_orders_2, regress_tp_app.tp_orders_4;
DROP SCHEMA regress_tp_app;
REVOKE CREATE ON SCHEMA public FROM regress_tp_app;
DROP ROLE regress_tp_app;
