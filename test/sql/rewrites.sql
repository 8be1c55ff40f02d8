-- Every DDL that changes an enabled table's stored values without firing a
-- row trigger is refused (CF013): ALTER COLUMN ... TYPE that rewrites or
-- reinterprets values (judged at ddl_command_start), and any rewrite that
-- writes computed values (the table_rewrite backstop).  Type changes that
-- keep every value and its text pass, and the feed goes on after them.  Run
-- as a table owner who is no superuser.
SET client_min_messages = warning;
CREATE ROLE regress_rw_owner LOGIN IN ROLE changefeed_reader;
GRANT CREATE ON SCHEMA public TO regress_rw_owner;
RESET client_min_messages;
SET ROLE regress_rw_owner;

-- SQLSTATE and message; `with_hint` adds the detail and hint.
CREATE FUNCTION public.rw_try(stmt text, with_hint bool DEFAULT false) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    state text; msg text; detail text; hint text;
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN state || ': ' || msg
        || CASE WHEN with_hint THEN E'\nDETAIL: ' || regexp_replace(coalesce(detail, ''), 'collection \d+', 'collection N')
                                 || E'\nHINT: ' || coalesce(hint, '') ELSE '' END;
END
$$;
-- Changes of `tbl` since position `pos`, in order.
CREATE FUNCTION public.rw_changes(tbl regclass, pos text)
RETURNS TABLE (operation text, doc_id text, current jsonb) LANGUAGE sql AS $$
    SELECT operation, doc_id, current FROM changefeed.read(tbl, pos, 1000) ORDER BY seq
$$;

CREATE DOMAIN public.rw_short_text AS text CHECK (length(VALUE) < 100);
CREATE DOMAIN public.rw_positive AS int CHECK (VALUE > 0);
CREATE TABLE public.rw_orders (id int PRIMARY KEY, status varchar(10), total numeric(10,2), code int,
                               note text, at timestamp, qty int);
INSERT INTO public.rw_orders VALUES
    (1, 'open', 10.25, -1, 'first  ', '2024-01-01 10:00', 2),
    (2, 'shipped', 99.99, 7, 'second', '2024-06-01 12:30', 5);
SELECT changefeed.enable('public.rw_orders') > 0 AS enabled;
SELECT changefeed.current_position() AS p0 \gset

-- The migration that changed every row with nothing in the feed: refused,
-- and the rows are as they were.
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN status TYPE text USING 'cancelled',
                                      ALTER COLUMN total TYPE numeric(10,0)$$, with_hint => true);
-- Each way of changing or reinterpreting values, alone.
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN total TYPE numeric(10,0)$$);    -- rounds 10.25
SELECT rw_try($$ALTER TABLE ONLY rw_orders ALTER COLUMN total TYPE numeric(10,0)$$);
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN total TYPE numeric(12,3)$$);    -- 10.25 becomes 10.250
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN total TYPE numeric(12,2) USING total + 0$$);
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN status TYPE varchar(5)$$);      -- narrows
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN status TYPE char(20)$$);        -- pads
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN note TYPE varchar(20)$$);       -- may cut trailing spaces
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN note TYPE text USING upper(note)$$);
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN note TYPE text USING rw_orders.note$$);
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN code TYPE int USING code + 1$$);
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN code TYPE bigint$$);
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN code TYPE oid$$);               -- -1 reads 4294967295
SET TimeZone = 'UTC';
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN at TYPE timestamptz$$);         -- no rewrite under UTC
RESET TimeZone;
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN at TYPE timestamp(0)$$);        -- rounds seconds
-- Columns filled by a rewrite (the table_rewrite backstop).
SELECT rw_try($$ALTER TABLE rw_orders ADD COLUMN r float8 DEFAULT random()$$, with_hint => true);
SELECT rw_try($$ALTER TABLE rw_orders ADD COLUMN seen timestamptz DEFAULT clock_timestamp()$$);
SELECT rw_try($$ALTER TABLE rw_orders ADD COLUMN twice int GENERATED ALWAYS AS (qty * 2) STORED$$);
SELECT rw_try($$ALTER TABLE rw_orders ADD COLUMN n serial$$);
SELECT rw_try($$ALTER TABLE rw_orders ADD COLUMN ident int GENERATED ALWAYS AS IDENTITY$$);
SELECT rw_try($$ALTER TABLE rw_orders ADD COLUMN p rw_positive DEFAULT 1$$);
-- An allowed change beside a refused one: the statement is refused whole.
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN status TYPE varchar(20), ADD COLUMN r2 float8 DEFAULT random()$$);
SELECT * FROM rw_orders ORDER BY id;
SELECT format_type(atttypid, atttypmod) AS status_type FROM pg_attribute
 WHERE attrelid = 'rw_orders'::regclass AND attname = 'status';
SELECT count(*) AS changes FROM rw_changes('rw_orders', :'p0');

-- Changes that keep every value and its text pass.
ALTER TABLE rw_orders ALTER COLUMN status TYPE varchar(20);
ALTER TABLE rw_orders ALTER COLUMN total TYPE numeric(12,2);
ALTER TABLE rw_orders ALTER COLUMN status TYPE varchar;
ALTER TABLE rw_orders ALTER COLUMN status TYPE text;
ALTER TABLE rw_orders ALTER COLUMN status TYPE varchar USING status;
ALTER TABLE rw_orders ALTER COLUMN note TYPE rw_short_text;         -- checked (a rewrite), not changed
-- (a domain's check that fails is PostgreSQL's own error)
SELECT rw_try($$ALTER TABLE rw_orders ALTER COLUMN code TYPE rw_positive$$);
ALTER TABLE rw_orders ALTER COLUMN note TYPE text COLLATE "C";
ALTER TABLE ONLY rw_orders ALTER COLUMN total TYPE numeric;
ALTER TABLE rw_orders ALTER COLUMN at TYPE timestamp;
ALTER TABLE rw_orders ADD COLUMN flag bool DEFAULT false, ADD COLUMN since date DEFAULT '2024-01-01',
                      ADD COLUMN extra int;
-- SET UNLOGGED copies the values but a crash would empty the table without a
-- change: refused; SET LOGGED of a logged table is nothing.
SELECT rw_try($$ALTER TABLE rw_orders SET UNLOGGED$$, true);
ALTER TABLE rw_orders SET LOGGED;
VACUUM FULL rw_orders;
-- Not enabled: the same DDL goes on as usual.
CREATE TABLE public.rw_plain (id int PRIMARY KEY, v int);
INSERT INTO public.rw_plain VALUES (1, 1);
ALTER TABLE rw_plain ALTER COLUMN v TYPE text USING 'x', ADD COLUMN r float8 DEFAULT random();
SELECT id, v FROM rw_plain;
SELECT id, status, total, code, note, at, flag, since, extra FROM rw_orders ORDER BY id;
SELECT count(*) AS changes FROM rw_changes('rw_orders', :'p0');
-- The feed goes on, with the values as they are.
UPDATE rw_orders SET qty = qty + 1 WHERE id = 1;
SELECT operation, doc_id, current ->> 'status' AS status, current ->> 'total' AS total,
       current ->> 'note' AS note, current ->> 'flag' AS flag FROM rw_changes('rw_orders', :'p0');
RESET ROLE;
SELECT table_name, intact, problems FROM changefeed.verify() WHERE table_name = 'rw_orders'::regclass;
SET ROLE regress_rw_owner;

-- The way out the hints give: disable, alter, enable again; readers from
-- before see history lost.  Also in one transaction, for a change that
-- needs no rewrite (int4 to oid).
SELECT changefeed.current_position() AS p1 \gset
SELECT changefeed.disable('public.rw_orders');
ALTER TABLE rw_orders ALTER COLUMN total TYPE numeric(10,0);
SELECT changefeed.enable('public.rw_orders') > 0 AS enabled;
SELECT rw_try(format('SELECT count(*) FROM changefeed.read(%L, %L)', 'rw_orders', :'p1'));
SELECT changefeed.current_position() AS p2 \gset
BEGIN;
SELECT changefeed.disable('public.rw_orders');
ALTER TABLE rw_orders ALTER COLUMN code TYPE oid;
SELECT changefeed.enable('public.rw_orders') > 0 AS enabled;
COMMIT;
SELECT rw_try(format('SELECT count(*) FROM changefeed.read(%L, %L)', 'rw_orders', :'p2'));
SELECT changefeed.current_position() AS p3 \gset
BEGIN;
SELECT changefeed.disable('public.rw_orders');
SELECT changefeed.enable('public.rw_orders') > 0 AS enabled;
COMMIT;
SELECT rw_try(format('SELECT count(*) FROM changefeed.read(%L, %L)', 'rw_orders', :'p3'));

-- A partitioned table: through the partitioned table, through a partition
-- named directly, and with ONLY.
CREATE TABLE public.rw_events (id int, region text, amount numeric(10,2), label varchar(10),
                               PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE public.rw_events_eu PARTITION OF public.rw_events FOR VALUES IN ('eu');
CREATE TABLE public.rw_events_us PARTITION OF public.rw_events FOR VALUES IN ('us');
INSERT INTO public.rw_events VALUES (1, 'eu', 1.25, 'a'), (2, 'us', 2.75, 'b');
SELECT changefeed.enable('public.rw_events', partition_key => '{region}') > 0 AS enabled;
SELECT changefeed.current_position() AS p4 \gset
SELECT rw_try($$ALTER TABLE rw_events ALTER COLUMN amount TYPE numeric(10,0)$$);
SELECT rw_try($$ALTER TABLE rw_events ALTER COLUMN label TYPE text USING 'z'$$);
SELECT rw_try($$ALTER TABLE rw_events ADD COLUMN r float8 DEFAULT random()$$);
SELECT rw_try($$ALTER TABLE rw_events ADD COLUMN twice numeric GENERATED ALWAYS AS (amount * 2) STORED$$);
SELECT rw_try($$ALTER TABLE rw_events_eu ALTER COLUMN amount TYPE numeric(10,0)$$);
SELECT rw_try($$ALTER TABLE ONLY rw_events_eu ALTER COLUMN label TYPE text USING 'z'$$);
SELECT rw_try($$ALTER TABLE rw_events_eu ADD COLUMN r float8 DEFAULT random()$$);
SELECT rw_try($$ALTER TABLE ONLY rw_events ALTER COLUMN amount TYPE numeric(10,0)$$);
SELECT * FROM rw_events ORDER BY id;
ALTER TABLE rw_events ALTER COLUMN label TYPE varchar(20);
ALTER TABLE rw_events ALTER COLUMN amount TYPE numeric(14,2);
ALTER TABLE rw_events ADD COLUMN flag bool DEFAULT true;
SELECT rw_try($$ALTER TABLE rw_events_eu SET UNLOGGED$$);
ALTER TABLE rw_events_eu SET ACCESS METHOD heap;
UPDATE rw_events SET label = 'aa' WHERE id = 1;
SELECT operation, doc_id, current FROM rw_changes('rw_events', :'p4');
RESET ROLE;
SELECT table_name, intact FROM changefeed.verify() WHERE table_name = 'rw_events'::regclass;
SET ROLE regress_rw_owner;

-- ALTER TYPE ... RENAME VALUE of an enum an enabled table holds (as itself,
-- in an array, in a domain over it) changes
-- stored values without a row trigger: refused.  ADD VALUE passes, and so
-- does a rename of an enum no enabled table holds.
CREATE TYPE public.rw_state AS ENUM ('open', 'shut');
CREATE TYPE public.rw_mood AS ENUM ('calm', 'wild');
CREATE TYPE public.rw_other AS ENUM ('x', 'y');
CREATE DOMAIN public.rw_moods AS public.rw_mood[];
ALTER TABLE rw_events ADD COLUMN state public.rw_state DEFAULT 'open';
ALTER TABLE rw_events ADD COLUMN moods public.rw_moods;
CREATE TABLE public.rw_unwatched (id int PRIMARY KEY, o public.rw_other);
SELECT changefeed.current_position() AS p5 \gset
SELECT rw_try($$ALTER TYPE public.rw_state RENAME VALUE 'shut' TO 'closed'$$, true);
SELECT rw_try($$ALTER TYPE public.rw_mood RENAME VALUE 'wild' TO 'furious'$$);
SELECT rw_try($$ALTER TYPE public.rw_state ADD VALUE 'closed'$$);
SELECT rw_try($$ALTER TYPE public.rw_other RENAME VALUE 'x' TO 'z'$$);
UPDATE rw_events SET state = 'shut', moods = '{wild}' WHERE id = 2;
SELECT operation, doc_id, current->>'state' AS state, current->'moods' AS moods FROM changefeed.read('rw_events', :'p5') ORDER BY seq;
DROP TABLE public.rw_unwatched;
-- An unlogged table is not enabled.
CREATE UNLOGGED TABLE public.rw_unlogged (id int PRIMARY KEY);
SELECT rw_try($$SELECT changefeed.enable('public.rw_unlogged')$$, true);
DROP TABLE public.rw_unlogged;
ALTER TABLE rw_events DROP COLUMN state, DROP COLUMN moods;

SELECT changefeed.disable('public.rw_orders', forget => true);
SELECT changefeed.disable('public.rw_events', forget => true);
RESET ROLE;
SET client_min_messages = warning;
DROP TABLE public.rw_orders, public.rw_plain, public.rw_events;
DROP DOMAIN public.rw_short_text, public.rw_positive, public.rw_moods;
DROP TYPE public.rw_state, public.rw_mood, public.rw_other;
DROP FUNCTION public.rw_try(text, bool), public.rw_changes(regclass, text);
REVOKE CREATE ON SCHEMA public FROM regress_rw_owner;
DROP OWNED BY regress_rw_owner;
DROP ROLE regress_rw_owner;
RESET client_min_messages;
