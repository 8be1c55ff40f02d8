-- Maintenance: NULL and infinite times are refused; the TTL sweep runs user
-- code as the table owner in a security-restricted operation; a failing step
-- does not undo the others; only a superuser can mark deletes as TTL; log
-- partitions are members of the extension.
\set SHOW_CONTEXT never
SELECT changefeed.preloaded() IS NOT NULL AS library_loaded;  -- defines the settings in this session

-- NULL and infinite times: CF003, and nothing is dropped.
CREATE TEMP TABLE partitions_before AS
SELECT inhrelid FROM pg_inherits WHERE inhparent = 'changefeed.log'::regclass;
SELECT try($$SELECT changefeed.maintain(NULL)$$);
SELECT try($$SELECT changefeed.maintain('infinity')$$);
SELECT try($$SELECT changefeed.prune(NULL)$$);
SELECT try($$SELECT changefeed.prune('-infinity')$$);
SELECT try($$SELECT changefeed.expire(NULL)$$);
SELECT try($$SELECT changefeed.create_partitions(7, NULL)$$);
SELECT try($$SELECT changefeed.create_partitions(7, 'infinity')$$);
SELECT try($$SELECT changefeed.expire_rows(1, NULL)$$);
SELECT try($$SELECT changefeed.expire_rows(1, 'infinity')$$);
SELECT try($$SELECT changefeed.expire_rows(NULL, now())$$);
SELECT count(*) AS partitions_gone FROM partitions_before b
 WHERE NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = b.inhrelid);
-- A partition that is not expired (or not a daily log partition) is refused.
SELECT try(format('SELECT changefeed.prune_partition(%L, now())',
                  (SELECT 'changefeed.' || relname FROM pg_class c JOIN partitions_before b ON b.inhrelid = c.oid
                    WHERE relname ~ '^log_[0-9]{8}$' ORDER BY relname DESC LIMIT 1)))
       ~ '^CF003: changefeed.log_[0-9]{8} is not a daily partition of changefeed.log older than the retention$'
       AS refused;
SELECT try($$SELECT changefeed.prune_partition('changefeed.log_default', now() + interval '1000 days')$$);

-- Daily partitions belong to the extension (pg_dump leaves them out).
SELECT count(*) FILTER (WHERE NOT changefeed.is_extension_member(c.oid)) AS not_members,
       count(*) > 0 AS some
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = 'changefeed.log'::regclass;

-- A table owner who is no superuser, with TTL tables and triggers of its own.
CREATE ROLE regress_cf_owner;
GRANT CREATE ON SCHEMA public TO regress_cf_owner;
SET ROLE regress_cf_owner;
CREATE TABLE owned_ok (id int PRIMARY KEY, expires_at timestamptz NOT NULL);
CREATE TABLE owned_side (id int PRIMARY KEY);
CREATE TABLE owned_audit (deleted_id int, run_as name, temp_table text);
CREATE TABLE owned_evil (id int PRIMARY KEY, expires_at timestamptz NOT NULL);
RESET ROLE;
SELECT changefeed.enable('owned_ok', ttl_column => 'expires_at') IS NOT NULL;
SELECT changefeed.enable('owned_side') IS NOT NULL;
SELECT changefeed.enable('owned_evil', ttl_column => 'expires_at') IS NOT NULL;
SELECT start_cursor('owned');
SET ROLE regress_cf_owner;
INSERT INTO owned_ok VALUES (1, now() - interval '1 hour'), (2, now() + interval '1 hour');
INSERT INTO owned_side VALUES (1);
INSERT INTO owned_evil VALUES (1, now() - interval '1 hour');
-- The owner cannot pass its own deletes off as TTL expiry.
SELECT try($$SET changefeed.delete_reason = 'ttl'$$);
SELECT try($$SELECT set_config('changefeed.delete_reason', 'ttl', true)$$);
DELETE FROM owned_ok WHERE id = 2;
-- Its triggers: one notes who runs it and deletes a row elsewhere, one
-- tries to make the owner a superuser.  (User code reached by maintenance sees
-- search_path = pg_catalog, pg_temp: it names its schemas.)
CREATE FUNCTION note_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A security-restricted operation refuses temporary tables.
    INSERT INTO public.owned_audit
    VALUES (OLD.id, current_user, public.try('CREATE TEMP TABLE t_escape (x int)'));
    DELETE FROM public.owned_side WHERE id = OLD.id;
    RETURN OLD;
END
$$;
CREATE TRIGGER note_delete BEFORE DELETE ON owned_ok FOR EACH ROW EXECUTE FUNCTION note_delete();
CREATE FUNCTION escalate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    ALTER ROLE regress_cf_owner SUPERUSER;
    RETURN OLD;
EXCEPTION WHEN insufficient_privilege THEN
    -- The refusal is worded differently by each PostgreSQL major.
    RAISE insufficient_privilege USING MESSAGE = 'ALTER ROLE regress_cf_owner SUPERUSER refused';
END
$$;
CREATE TRIGGER escalate BEFORE DELETE ON owned_evil FOR EACH ROW EXECUTE FUNCTION escalate();
RESET ROLE;
-- A collection whose TTL delete always raises.
CREATE TABLE ttl_raises (id int PRIMARY KEY, expires_at timestamptz NOT NULL);
CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'rows of ttl_raises are never deleted';
END
$$;
CREATE TRIGGER refuse_delete BEFORE DELETE ON ttl_raises FOR EACH ROW EXECUTE FUNCTION refuse_delete();
SELECT changefeed.enable('ttl_raises', ttl_column => 'expires_at') IS NOT NULL;
INSERT INTO ttl_raises VALUES (1, now() - interval '1 hour');
SELECT operation, doc_id, ttl_expired FROM next_changes('owned', 'owned_ok');

-- One maintain() call, as if 60 days had passed: two TTL steps fail (the
-- escalating trigger is refused, the other raises), the rest is done.
SELECT partitions_created > 0 AS created, partitions_dropped > 0 AS dropped, ttl_deleted >= 1 AS deleted,
       failed_steps
  FROM changefeed.maintain(now() + interval '60 days');
-- The owner is still no superuser; its rows are still there.
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_cf_owner';
SELECT count(*) AS evil_rows FROM owned_evil;
SELECT count(*) AS raising_rows FROM ttl_raises;
-- The other collection's TTL ran, as its owner, restricted.
SELECT count(*) AS ok_rows FROM owned_ok;
SELECT deleted_id, run_as, temp_table FROM owned_audit;
-- (the partition holding that delete was dropped in the same call: the horizon says so)
SELECT count(*) AS horizons FROM changefeed.horizon h JOIN changefeed.collections c ON c.id = h.collection_id
 WHERE c.table_name = 'owned_ok'::regclass;

-- expire() alone is not forgiving: it raises the first failing collection's error.
SELECT try($$SELECT changefeed.expire(now())$$);

-- A sweep marks its own collection's deletes as expiry, not those its
-- triggers make elsewhere.
SELECT changefeed.create_partitions() > 0 AS recreated;  -- today's partition again
SELECT start_cursor('owned');
SELECT start_cursor('side');
INSERT INTO owned_ok VALUES (4, now() - interval '1 hour');
INSERT INTO owned_side VALUES (4);
SELECT changefeed.expire_rows((SELECT id FROM changefeed.collections WHERE table_name = 'owned_ok'::regclass), now());
SELECT operation, doc_id, ttl_expired FROM next_changes('owned', 'owned_ok') WHERE operation = 'delete';
SELECT operation, doc_id, ttl_expired FROM next_changes('side', 'owned_side') WHERE operation = 'delete';

-- A superuser may still mark its own deletes as TTL expiry.
INSERT INTO owned_ok VALUES (3, now() + interval '1 day');
BEGIN;
SET LOCAL changefeed.delete_reason = 'ttl';
DELETE FROM owned_ok WHERE id = 3;
COMMIT;
SELECT operation, doc_id, ttl_expired FROM next_changes('owned', 'owned_ok');

-- Clean up, and undo the time travel for the tests that follow.
SELECT changefeed.disable('owned_ok'), changefeed.disable('owned_side'), changefeed.disable('owned_evil'),
       changefeed.disable('ttl_raises');
DROP TABLE owned_ok, owned_side, owned_evil, owned_audit, ttl_raises;
DROP FUNCTION note_delete(), escalate(), refuse_delete();
REVOKE CREATE ON SCHEMA public FROM regress_cf_owner;
DROP ROLE regress_cf_owner;
DELETE FROM changefeed.log_default;
