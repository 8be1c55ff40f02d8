-- changefeed: the live instances of each processor.
--
-- Leases are filed under instance names, so two processes running under one
-- name would each take the other's leases for their own and both read every
-- range.  An instance registers its name with the session it renews its
-- leases on; a second instance under a name whose session is still alive is
-- refused (CF015).  A name whose session is gone (the process crashed, its
-- connection died) is taken over at once: a restarted service under the same
-- name does not wait for an expiry.  Liveness is the session itself (its pid
-- and start time in pg_stat_activity), never a clock -- except behind a
-- transaction pooler, where the calls of one client land on whichever
-- server session the pooler hands it and a session means nothing: such an
-- instance registers with a hold (instance_register(..., hold)), renewed by
-- its lease calls, and its name is taken while the hold lasts.

-- Not dumped: sessions of another cluster mean nothing after a restore.
CREATE TABLE changefeed.instance (
    collection_id  int NOT NULL REFERENCES changefeed.collection (id) ON DELETE CASCADE,
    processor      text NOT NULL,
    instance       text NOT NULL,
    token          text NOT NULL,          -- chosen by the instance at each start
    backend_pid    int NOT NULL,           -- the session it registered from
    backend_start  timestamptz,
    registered_at  timestamptz NOT NULL DEFAULT now(),
    heartbeat_at   timestamptz NOT NULL DEFAULT now(),
    held_until     timestamptz,            -- registered with a hold: live until then, whatever the session
    PRIMARY KEY (collection_id, processor, instance)
);

-- Whether the session `pid` that started at `started` still runs.  A pid
-- reused by a later session does not count.  When the start time cannot be
-- seen (the extension's owner may not read other roles' statistics) an
-- existing pid counts as alive: refusing a name wrongly is safer than letting
-- two instances share it.
CREATE OR REPLACE FUNCTION changefeed.session_alive(pid int, started timestamptz) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_stat_get_activity($1) a
                    WHERE a.pid = $1
                      AND (a.backend_start IS NULL OR $2 IS NULL OR a.backend_start = $2))
$$;

-- Whether a registration still holds its name: until its hold ends when it
-- has one (backend_pid is 0 then), else while its session runs.
CREATE OR REPLACE FUNCTION changefeed.registration_alive(pid int, started timestamptz, held_until timestamptz)
RETURNS bool LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN $3 IS NOT NULL THEN $3 > now() ELSE changefeed.session_alive($1, $2) END
$$;

-- Extends the hold of a registration that has one to now + `duration`: the
-- lease calls of its instance (renew_holder, balanced) call this.
CREATE OR REPLACE FUNCTION changefeed.instance_hold(collection_id int, processor text, instance text,
                                                    duration interval)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    UPDATE changefeed.instance i SET held_until = now() + $4, heartbeat_at = now()
     WHERE i.collection_id = $1 AND i.processor = $2 AND i.instance = $3 AND i.held_until IS NOT NULL;
$$;

-- The registered instances of a processor that count for balancing: those
-- registered from a session that is still alive (an instance registers
-- before its first acquire, so instances started together see each other),
-- and `instance` itself.  lease_acquire() adds the owners of unexpired
-- leases (a registration may be gone while its instance still renews).
CREATE OR REPLACE FUNCTION changefeed.live_instances(collection_id int, processor text, instance text)
RETURNS SETOF text LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT i.instance FROM changefeed.instance i
     WHERE i.collection_id = $1 AND i.processor = $2
       AND changefeed.registration_alive(i.backend_pid, i.backend_start, i.held_until)
    UNION
    SELECT $3
$$;

-- Registers `instance` of processor `processor` for the calling session,
-- under `token` (the instance's own, new at each start); with `hold`, for
-- that long instead, renewed by the instance's lease calls (a client behind a
-- transaction pooler, whose session changes from call to call).  Raises CF015 when
-- another token holds the name from a session that is still alive.
-- Registering again with the same token (after a reconnect) moves the
-- registration to the calling session.  When the name changes hands, the
-- leases still filed under it get a new epoch: whatever of the previous
-- holder still runs can no longer checkpoint them.
CREATE OR REPLACE FUNCTION changefeed.instance_register(tbl regclass, processor text, instance text, token text,
                                                        hold interval DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
    -- Held for a time: no session of its own (pid 0 matches none).
    me int := CASE WHEN hold IS NULL THEN pg_backend_pid() ELSE 0 END;
    my_start timestamptz := CASE WHEN hold IS NULL
                                 THEN (SELECT a.backend_start FROM pg_stat_get_activity(pg_backend_pid()) a) END;
    until timestamptz;
    r changefeed.instance;
BEGIN
    IF token IS NULL OR token = '' THEN
        RAISE EXCEPTION 'instance token must not be empty' USING ERRCODE = 'CF003';
    END IF;
    IF hold IS NOT NULL THEN
        PERFORM changefeed.check_duration(hold);
        until := now() + hold;
    END IF;
    -- A cap on the live instances of one processor (dead registrations do
    -- not count): balancing works over this list on every acquire.  Their
    -- sessions are looked at only when the registrations alone reach it.
    IF (SELECT count(*) FROM changefeed.instance i
         WHERE i.collection_id = c.id AND i.processor = processor AND i.instance <> instance) >= 1000
       AND (SELECT count(*) FROM changefeed.instance i
             WHERE i.collection_id = c.id AND i.processor = processor AND i.instance <> instance
               AND changefeed.registration_alive(i.backend_pid, i.backend_start, i.held_until)) >= 1000 THEN
        RAISE EXCEPTION 'processor "%" on % has 1000 live instances already', processor, tbl
            USING ERRCODE = 'CF018',
                  HINT = 'Stop instances first; more instances than ranges only wait for a range to free up.';
    END IF;
    INSERT INTO changefeed.instance AS i
           (collection_id, processor, instance, token, backend_pid, backend_start, held_until)
    VALUES (c.id, processor, instance, token, me, my_start, until)
    ON CONFLICT DO NOTHING;
    IF NOT FOUND THEN
        SELECT * INTO r FROM changefeed.instance i
         WHERE i.collection_id = c.id AND i.processor = processor AND i.instance = instance
           FOR UPDATE;
        IF r.token = token THEN
            UPDATE changefeed.instance i
               SET backend_pid = me, backend_start = my_start, held_until = until, heartbeat_at = now()
             WHERE i.collection_id = c.id AND i.processor = processor AND i.instance = instance;
            RETURN;
        END IF;
        IF NOT (hold IS NULL AND r.held_until IS NULL AND r.backend_pid = me
                AND r.backend_start IS NOT DISTINCT FROM my_start)
           AND changefeed.registration_alive(r.backend_pid, r.backend_start, r.held_until) THEN
            RAISE EXCEPTION 'instance "%" of processor "%" on % is already running', instance, processor, tbl
                USING ERRCODE = 'CF015',
                      DETAIL = CASE WHEN r.held_until IS NULL
                                    THEN format('It registered at %s from the session with pid %s, which is still alive.',
                                                r.registered_at, r.backend_pid)
                                    ELSE format('It registered at %s and holds the name until %s (it renews that '
                                                'while it runs).', r.registered_at, r.held_until) END,
                      HINT = 'Choose another instance name (or none: the default is unique per process), '
                             'or stop the other instance.';
        END IF;
        UPDATE changefeed.instance i
           SET token = token, backend_pid = me, backend_start = my_start, held_until = until,
               registered_at = now(), heartbeat_at = now()
         WHERE i.collection_id = c.id AND i.processor = processor AND i.instance = instance;
    END IF;
    -- A new holder of the name: fence the previous one's leases.
    PERFORM changefeed.leases_moved(c.id, processor);
    UPDATE changefeed.lease l
       SET epoch = l.epoch + 1, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance;
END
$$;

-- Removes the registration if `token` still holds it; returns whether it did.
CREATE OR REPLACE FUNCTION changefeed.instance_unregister(tbl regclass, processor text, instance text, token text)
RETURNS bool LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_leaving(tbl, processor, instance);
BEGIN
    DELETE FROM changefeed.instance i
     WHERE i.collection_id = c.id AND i.processor = processor AND i.instance = instance
       AND i.token = token;
    RETURN FOUND;
END
$$;

-- The registered instances of a processor, and whether their session is alive.
CREATE OR REPLACE FUNCTION changefeed.instances(tbl regclass, processor text)
RETURNS TABLE (instance text, registered_at timestamptz, heartbeat_at timestamptz, live bool)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_seen(tbl, processor);
BEGIN
    RETURN QUERY
    SELECT i.instance, i.registered_at, i.heartbeat_at, changefeed.registration_alive(i.backend_pid, i.backend_start, i.held_until)
      FROM changefeed.instance i
     WHERE i.collection_id = c.id AND i.processor = processor
     ORDER BY i.instance;
END
$$;
