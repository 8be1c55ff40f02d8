-- changefeed: leases and checkpoints of change-feed processors.
--
-- One lease per (collection, processor name, range).  The instance owning a
-- lease is the only one reading that range; `epoch` is bumped on every change
-- of ownership and fences checkpoints: an instance that lost a lease can never
-- move its checkpoint again.  All times come from the server's clock, so
-- instances with skewed clocks still agree on expiry.
--
-- SQLSTATEs: see sqlstates.sql (CF010 lease lost, CF011 bad name, CF003).

CREATE TABLE changefeed.lease (
    collection_id     int NOT NULL REFERENCES changefeed.collection (id) ON DELETE CASCADE,
    processor         text NOT NULL,
    range_id          int NOT NULL,
    owner             text,                    -- null: free; live while its holder row is
    epoch             bigint NOT NULL DEFAULT 0,
    -- Unused: 0.2 kept an expiry per lease (changefeed.holder has one per
    -- instance now).  Kept so that a dump of 0.2 restores into this version.
    expires_at        timestamptz,
    checkpoint        text NOT NULL,           -- position to read the log from
    -- start_from_beginning: the table is scanned before the log is read.
    backfill_done     bool NOT NULL DEFAULT true,
    backfill_after    jsonb,                   -- primary key of the last row delivered
    backfill_rows     bigint NOT NULL DEFAULT 0,
    backfill_position text,                    -- where the log continues after the scan
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (collection_id, processor, range_id)
);

SELECT pg_catalog.pg_extension_config_dump('changefeed.lease', '');

-- One expiry per instance holding leases of a processor: its leases are live
-- while its row here is unexpired, so a renewal is one row update whatever
-- the number of ranges.  A lease whose owner has no unexpired row is free to
-- take.  Not dumped: after a restore nobody holds anything.
CREATE TABLE changefeed.holder (
    collection_id   int NOT NULL REFERENCES changefeed.collection (id) ON DELETE CASCADE,
    processor       text NOT NULL,
    instance        text NOT NULL,
    expires_at      timestamptz NOT NULL,
    -- Where this instance's last full balancing step left things: the
    -- processor's lease generation and the live instances it counted.  A
    -- step that finds both as they were has nothing to do (balance_step).
    seen_generation bigint,
    seen_live       text[],
    PRIMARY KEY (collection_id, processor, instance)
);

-- The leases of the processors the querying role owns (all of them for admins).
CREATE OR REPLACE VIEW changefeed.leases WITH (security_barrier) AS
SELECT l.collection_id, c.relid AS table_name, l.processor, l.range_id, l.owner,
       l.epoch, h.expires_at, h.expires_at > now() AS live, l.checkpoint,
       l.backfill_done, l.backfill_rows, l.updated_at, p.owner_role
  FROM changefeed.lease l
  JOIN changefeed.collection c ON c.id = l.collection_id
  LEFT JOIN changefeed.processor p ON p.collection_id = l.collection_id AND p.name = l.processor
  LEFT JOIN changefeed.holder h ON h.collection_id = l.collection_id AND h.processor = l.processor
                               AND h.instance = l.owner
 WHERE pg_catalog.pg_has_role('changefeed_admin', 'USAGE')
    OR (p.owner_role IS NOT NULL AND pg_catalog.pg_has_role(p.owner_role, 'USAGE'));

CREATE OR REPLACE FUNCTION changefeed.check_name(name text, what text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF name IS NULL OR btrim(name) = '' THEN
        RAISE EXCEPTION '% name must not be empty', what USING ERRCODE = 'CF011';
    END IF;
    IF length(name) > 200 THEN
        RAISE EXCEPTION '% name must be at most 200 characters', what USING ERRCODE = 'CF011';
    END IF;
    RETURN name;
END
$$;

CREATE OR REPLACE FUNCTION changefeed.check_duration(d interval) RETURNS interval
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF d IS NULL OR d <= interval '0' THEN
        RAISE EXCEPTION 'lease duration must be a positive interval, not %', coalesce(d::text, 'null')
            USING ERRCODE = 'CF003';
    END IF;
    RETURN d;
END
$$;

-- The collection of `tbl`, once the processor name (and, when
-- `check_instance`, the instance name) is valid and the calling role owns
-- processor `processor` (or is an admin).
CREATE OR REPLACE FUNCTION changefeed.owned_processor(tbl regclass, processor text, instance text,
                                                      check_instance bool) RETURNS changefeed.collection
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.check_name(processor, 'processor');
    IF check_instance THEN
        PERFORM changefeed.check_name(instance, 'instance');
    END IF;
    PERFORM changefeed.require_processor(tbl, c.id, processor, changefeed.caller());
    RETURN c;
END
$$;

-- The prologue of every lease function but lease_init, which claims the name.
CREATE OR REPLACE FUNCTION changefeed.processor_of(tbl regclass, processor text) RETURNS changefeed.collection
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM changefeed.owned_processor(tbl, processor, NULL, false);
$$;

-- The prologue of a call that only reads what is filed under the name: the
-- owner checked without a lock (require_processor_read).
CREATE OR REPLACE FUNCTION changefeed.processor_seen(tbl regclass, processor text) RETURNS changefeed.collection
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
BEGIN
    PERFORM changefeed.check_name(processor, 'processor');
    PERFORM changefeed.require_processor_read(tbl, c.id, processor, changefeed.caller());
    RETURN c;
END
$$;

-- processor_seen() for a call that only watches a processor (lag()), which
-- the table's owner may make too: a processor on its own table is part of
-- what it runs.  Watching only: moving, forgetting or acting for the
-- processor stays with its owning role and the admins.
CREATE OR REPLACE FUNCTION changefeed.processor_watched(tbl regclass, processor text) RETURNS changefeed.collection
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    who oid := changefeed.caller();
BEGIN
    PERFORM changefeed.check_name(processor, 'processor');
    IF pg_has_role(who, (SELECT k.relowner FROM pg_class k WHERE k.oid = c.relid), 'USAGE') THEN
        IF changefeed.processor_owner(c.id, processor, 'none') IS NULL THEN
            PERFORM changefeed.processor_unknown(tbl, processor);
        END IF;
        RETURN c;
    END IF;
    PERFORM changefeed.require_processor_read(tbl, c.id, processor, who);
    RETURN c;
END
$$;

-- The prologue of the calls by which an instance gives something up
-- (lease_release, instance_unregister): no SELECT needed, so an instance
-- whose role lost it still leaves cleanly.
CREATE OR REPLACE FUNCTION changefeed.processor_leaving(tbl regclass, processor text, instance text)
RETURNS changefeed.collection
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    SELECT * FROM changefeed.owned_processor(tbl, processor, instance, true);
$$;

-- The same, for a call by one instance of the processor, which also needs
-- SELECT on the table: what an instance files stays with roles that may read it.
CREATE OR REPLACE FUNCTION changefeed.processor_of(tbl regclass, processor text, instance text)
RETURNS changefeed.collection
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    c changefeed.collection := changefeed.processor_leaving(tbl, processor, instance);
BEGIN
    PERFORM changefeed.require_select(tbl, changefeed.caller(), 'run a processor on');
    RETURN c;
END
$$;

-- Creates the processor's lease set on its first start and returns the number
-- of leases.  The leases hold the start position, so an instance that starts
-- later does not skip what was written in between.  The start is now, or at
-- most one of: `from_beginning` (scan the table first), `start_at` (the
-- changes written since then, see position_since) or `start_position`.
-- Existing leases (checkpoints) always win: the start options are then only
-- validated, so a service restarted with an old start time goes on from its
-- checkpoints.  CF003 for conflicting or infinite options, CF004/CF005 for a
-- bad position, CF006 when retention dropped what the start needs.
CREATE OR REPLACE FUNCTION changefeed.lease_init(tbl regclass, processor text, from_beginning bool DEFAULT false,
                                                 start_at timestamptz DEFAULT NULL, start_position text DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    pos text;
BEGIN
    PERFORM changefeed.check_name(processor, 'processor');
    -- A processor reads the table's feed, and belongs to the role that first starts it.
    PERFORM changefeed.require_read(tbl, changefeed.caller(), c.tenant_column, NULL);
    PERFORM changefeed.require_processor(tbl, c.id, processor, changefeed.caller(), true);
    IF from_beginning IS NULL THEN
        RAISE EXCEPTION 'from_beginning must not be null' USING ERRCODE = 'CF003';
    END IF;
    IF from_beginning::int + (start_at IS NOT NULL)::int + (start_position IS NOT NULL)::int > 1 THEN
        RAISE EXCEPTION 'at most one of from_beginning, start_at and start_position may be given'
            USING ERRCODE = 'CF003';
    END IF;
    IF start_at IS NOT NULL AND NOT isfinite(start_at) THEN
        RAISE EXCEPTION 'start_at must be a finite time, not %', start_at USING ERRCODE = 'CF003';
    END IF;
    IF start_position IS NOT NULL THEN
        PERFORM changefeed.position_decode(start_position);
    END IF;
    -- One first start at a time: a concurrent one waits here, then finds the
    -- leases.  NO KEY UPDATE: it does not wait for the share locks of claims
    -- (require_processor), which every starter holds itself.
    PERFORM 1 FROM changefeed.processor p WHERE p.collection_id = c.id AND p.name = processor FOR NO KEY UPDATE;
    IF EXISTS (SELECT 1 FROM changefeed.lease l WHERE l.collection_id = c.id AND l.processor = processor) THEN
        RETURN c.ranges;
    END IF;
    IF start_at IS NOT NULL THEN
        pos := changefeed.position_since(c, start_at);
    ELSIF start_position IS NOT NULL THEN
        pos := start_position;
    ELSE
        pos := changefeed.current_position();
    END IF;
    PERFORM changefeed.check_history(c, (changefeed.position_decode(pos)).lo);
    INSERT INTO changefeed.lease AS l
           (collection_id, processor, range_id, checkpoint, backfill_done, backfill_position)
    SELECT c.id, processor, r, pos, NOT from_beginning, CASE WHEN from_beginning THEN pos END
      FROM generate_series(0, c.ranges - 1) r
    ON CONFLICT DO NOTHING;
    PERFORM changefeed.leases_moved(c.id, processor);
    RETURN c.ranges;
END
$$;

-- Whether `instance` holds the leases it owns of `processor`: its holder row
-- is unexpired.
CREATE OR REPLACE FUNCTION changefeed.holder_live(collection_id int, processor text, instance text) RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT EXISTS (SELECT 1 FROM changefeed.holder h
                    WHERE h.collection_id = $1 AND h.processor = $2 AND h.instance = $3 AND h.expires_at > now())
$$;

-- Extends the expiry of `instance` (and so of every lease it owns) to at
-- least now + `duration`, creating its holder row.  Never shortened: the
-- instance counts on the longest expiry it was given.
CREATE OR REPLACE FUNCTION changefeed.hold(collection_id int, processor text, instance text, duration interval)
RETURNS void LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    INSERT INTO changefeed.holder AS h (collection_id, processor, instance, expires_at)
    VALUES ($1, $2, $3, now() + $4)
    ON CONFLICT (collection_id, processor, instance)
    DO UPDATE SET expires_at = greatest(h.expires_at, excluded.expires_at);
$$;

-- Every change of the owner or epoch of a processor's leases (and of its
-- lease set) calls this in the same transaction, before it touches a lease:
-- the generation moves on, so instances that knew the previous one read
-- their leases again.  Called first, its row lock is taken before any lease
-- row's, in the order balance_step() takes them (no deadlock).
CREATE OR REPLACE FUNCTION changefeed.leases_moved(collection_id int, processor text) RETURNS void
LANGUAGE sql SET search_path = pg_catalog, pg_temp AS $$
    UPDATE changefeed.processor p SET lease_generation = p.lease_generation + 1
     WHERE p.collection_id = $1 AND p.name = $2;
$$;

-- The instances a balancing step of `instance` counts, in name order: the
-- registered ones whose session is alive (live_instances, with `instance`
-- itself) and those whose leases are unexpired (a registration may be gone
-- while its instance still renews).
CREATE OR REPLACE FUNCTION changefeed.live_set(collection_id int, processor text, instance text) RETURNS text[]
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT array_agg(v.x ORDER BY v.x) FROM (
        SELECT x FROM changefeed.live_instances($1, $2, $3) x
        UNION
        SELECT h.instance FROM changefeed.holder h
         WHERE h.collection_id = $1 AND h.processor = $2 AND h.expires_at > now()) v
$$;

-- Takes one lease for `instance`, bumping its epoch so the previous owner is
-- fenced.  Returns false if the lease changed hands since it was looked at.
CREATE OR REPLACE FUNCTION changefeed.lease_steal(tbl regclass, processor text, range_id int, instance text,
                                                  from_owner text, duration interval)
RETURNS bool LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    PERFORM changefeed.check_duration(duration);
    PERFORM changefeed.leases_moved(c.id, processor);
    UPDATE changefeed.lease l
       SET owner = instance, epoch = l.epoch + 1, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = range_id
       AND l.owner IS NOT DISTINCT FROM from_owner;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM changefeed.hold(c.id, processor, instance, duration);
    RETURN true;
END
$$;

-- The leases `instance` holds, with where each range resumes.
CREATE OR REPLACE FUNCTION changefeed.leases_held(collection_id int, processor text, instance text)
RETURNS TABLE (range_id int, epoch bigint, checkpoint text, backfill_done bool,
               backfill_after jsonb, backfill_rows bigint, backfill_position text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT l.range_id, l.epoch, l.checkpoint, l.backfill_done, l.backfill_after, l.backfill_rows,
           l.backfill_position
      FROM changefeed.lease l
     WHERE l.collection_id = $1 AND l.processor = $2 AND l.owner = $3
     ORDER BY l.range_id
$$;

-- What lease_balance() and lease_keep() answer: the processor's lease
-- generation and, unless it is `known`, the leases `instance` owns (range,
-- epoch); one row with a null range when it is `known` (nothing changed) or
-- `instance` owns none.  The generation is read first: leases read after it
-- may be newer (the caller then only reads them again), never older.
CREATE OR REPLACE FUNCTION changefeed.leases_since(collection_id int, processor text, instance text, known bigint)
RETURNS TABLE (generation bigint, range_id int, epoch bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
    SELECT p.lease_generation INTO generation FROM changefeed.processor p
     WHERE p.collection_id = collection_id AND p.name = processor;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF generation IS DISTINCT FROM known THEN
        RETURN QUERY SELECT generation, l.range_id, l.epoch FROM changefeed.lease l
                      WHERE l.collection_id = collection_id AND l.processor = processor AND l.owner = instance
                      ORDER BY l.range_id;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    range_id := NULL;
    epoch := NULL;
    RETURN NEXT;
END
$$;

-- One balancing step for `instance`.  With N live instances (live_set) and
-- R ranges, an equal share is R/N rounded down or up.  The step takes free
-- leases (no owner, or an owner whose expiry passed) up to R/N rounded up,
-- then, while `instance` holds fewer than R/N rounded down, takes the
-- missing ones at once from instances holding more than that (never making
-- them fall below it), a few from each, bumping the epochs so the previous
-- owners are fenced (their checkpoints fail with CF010).  Instances above
-- their share give nothing away on their own: the ones below take.  So
-- instances started together are balanced after one step each, and a
-- joining or leaving instance within about one acquire interval (a dead
-- one's leases once its expiry passed).
-- A step that finds the processor's lease generation and the live instances
-- as its previous step left them, and its own expiry unexpired, has nothing
-- to do: it returns after reading three small rows, whatever the number of
-- ranges, and writes nothing.
CREATE OR REPLACE FUNCTION changefeed.balance_step(c changefeed.collection, processor text, instance text,
                                                   duration interval)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    me changefeed.holder;
    gen bigint;
    live_now text[];
    holding text[];   -- the instances whose expiry has not passed
    live int;
    floor_share int;
    ceil_share int;
    mine int;
    n_free int;
    moved bool := false;
    ids int[];
BEGIN
    SELECT p.lease_generation INTO gen FROM changefeed.processor p
     WHERE p.collection_id = c.id AND p.name = processor;
    SELECT * INTO me FROM changefeed.holder h
     WHERE h.collection_id = c.id AND h.processor = processor AND h.instance = instance;
    live_now := changefeed.live_set(c.id, processor, instance);
    IF me.expires_at > now() AND me.seen_generation = gen AND me.seen_live = live_now THEN
        RETURN;
    END IF;

    -- Serialize balancing steps of one processor: each sees the others'
    -- result.  One row lock (the processor's), not one per lease; renewals
    -- (renew_holder) wait for it, so an expiry judged passed here is not
    -- extended before this step's takeover commits.
    -- NO KEY UPDATE: the step holds its claim's share lock already.
    SELECT p.lease_generation INTO gen FROM changefeed.processor p
     WHERE p.collection_id = c.id AND p.name = processor FOR NO KEY UPDATE;
    IF NOT EXISTS (SELECT 1 FROM changefeed.lease l WHERE l.collection_id = c.id AND l.processor = processor) THEN
        RAISE EXCEPTION 'processor "%" has no leases on %', processor, c.relid::regclass
            USING ERRCODE = 'CF003', HINT = 'Call changefeed.lease_init() first.';
    END IF;
    -- After the lock: what the steps before this one left.  Our own leases
    -- come back without a new epoch if our expiry had passed: nobody else
    -- took them meanwhile (they would not be ours).
    PERFORM changefeed.hold(c.id, processor, instance, duration);
    live_now := changefeed.live_set(c.id, processor, instance);
    holding := ARRAY(SELECT h.instance FROM changefeed.holder h
                      WHERE h.collection_id = c.id AND h.processor = processor AND h.expires_at > now());
    live := cardinality(live_now);
    floor_share := c.ranges / live;
    ceil_share := ceil(c.ranges::numeric / live)::int;

    -- One pass over the leases.
    SELECT count(*) FILTER (WHERE l.owner = instance),
           count(*) FILTER (WHERE l.owner IS DISTINCT FROM instance
                              AND (l.owner IS NULL OR l.owner <> ALL (holding)))
      INTO mine, n_free
      FROM changefeed.lease l
     WHERE l.collection_id = c.id AND l.processor = processor;

    IF mine < ceil_share AND n_free > 0 THEN
        SELECT array_agg(f.range_id) INTO ids FROM (
            SELECT l.range_id FROM changefeed.lease l
             WHERE l.collection_id = c.id AND l.processor = processor
               AND l.owner IS DISTINCT FROM instance
               AND (l.owner IS NULL OR l.owner <> ALL (holding))
             ORDER BY l.range_id LIMIT ceil_share - mine
               FOR NO KEY UPDATE) f;   -- in range order (see lease_checkpoint_many)
        UPDATE changefeed.lease l
           SET owner = instance, epoch = l.epoch + 1, updated_at = now()
         WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = ANY (ids);
        moved := moved OR FOUND;
        mine := mine + coalesce(cardinality(ids), 0);
    END IF;

    IF mine < floor_share THEN
        -- Each instance above the share gives its highest ranges beyond it,
        -- taken round-robin so that all of them come down together.
        WITH held AS (
            SELECT l.range_id, l.owner,
                   count(*) OVER (PARTITION BY l.owner) AS n,
                   row_number() OVER (PARTITION BY l.owner ORDER BY l.range_id DESC) AS k
              FROM changefeed.lease l
             WHERE l.collection_id = c.id AND l.processor = processor
               AND l.owner <> instance AND l.owner = ANY (holding)
        )
        SELECT array_agg(t.range_id) INTO ids FROM (
            SELECT h.range_id FROM held h
             WHERE h.k <= h.n - floor_share
             ORDER BY h.k, h.n DESC, h.owner
             LIMIT floor_share - mine) t;
        PERFORM 1 FROM changefeed.lease l   -- in range order (see lease_checkpoint_many)
          WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = ANY (ids)
          ORDER BY l.range_id FOR NO KEY UPDATE;
        UPDATE changefeed.lease l
           SET owner = instance, epoch = l.epoch + 1, updated_at = now()
         WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = ANY (ids);
        moved := moved OR FOUND;
    END IF;

    IF moved THEN
        PERFORM changefeed.leases_moved(c.id, processor);
        gen := gen + 1;
    END IF;
    UPDATE changefeed.holder h SET seen_generation = gen, seen_live = live_now
     WHERE h.collection_id = c.id AND h.processor = processor AND h.instance = instance;
END
$$;

-- What lease_acquire() and lease_balance() do first: the arguments checked
-- and one balancing step for `instance` (balance_step); returns its collection.
CREATE OR REPLACE FUNCTION changefeed.balanced(tbl regclass, processor text, instance text, duration interval)
RETURNS changefeed.collection LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    PERFORM changefeed.check_duration(duration);
    PERFORM changefeed.instance_hold(c.id, processor, instance, duration);
    PERFORM changefeed.balance_step(c, processor, instance, duration);
    RETURN c;
END
$$;

-- One balancing step for `instance`; returns the leases it owns afterwards.
CREATE OR REPLACE FUNCTION changefeed.lease_acquire(tbl regclass, processor text, instance text, duration interval)
RETURNS TABLE (range_id int, epoch bigint, checkpoint text, backfill_done bool,
               backfill_after jsonb, backfill_rows bigint, backfill_position text)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.balanced(tbl, processor, instance, duration);
BEGIN
    RETURN QUERY SELECT * FROM changefeed.leases_held(c.id, processor, instance);
END
$$;

-- One balancing step for `instance` (balance_step), answered as
-- leases_since(): "unchanged" (the generation `known`, no range) when no
-- lease of the processor changed hands since the caller last looked, else
-- the leases it owns.  What a running processor calls: a step that changes
-- nothing costs the same at 16 ranges as at 4096.
CREATE OR REPLACE FUNCTION changefeed.lease_balance(tbl regclass, processor text, instance text, duration interval,
                                                    known bigint DEFAULT NULL)
RETURNS TABLE (generation bigint, range_id int, epoch bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.balanced(tbl, processor, instance, duration);
BEGIN
    RETURN QUERY SELECT * FROM changefeed.leases_since(c.id, processor, instance, known);
END
$$;

-- Extends the expiry of `instance`, and with it every lease it owns, in one
-- row update (an instance that owns none is not given one).
-- It first waits for a balancing step or any other change of owners in
-- progress (they lock or update the processor row; renewals share it): a
-- step that found the expiry passed and is taking the leases over commits
-- first, and the caller then reads that they are gone.
CREATE OR REPLACE FUNCTION changefeed.renew_holder(c changefeed.collection, processor text, instance text,
                                                   duration interval)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
    PERFORM changefeed.check_duration(duration);
    PERFORM 1 FROM changefeed.processor p WHERE p.collection_id = c.id AND p.name = processor FOR SHARE;
    PERFORM changefeed.instance_hold(c.id, processor, instance, duration);
    UPDATE changefeed.holder h SET expires_at = greatest(h.expires_at, now() + duration)
     WHERE h.collection_id = c.id AND h.processor = processor AND h.instance = instance;
    -- Leases still filed under the instance without an expiry of its own (a
    -- restored database): nobody took them, so they are its again.
    IF NOT FOUND AND EXISTS (SELECT 1 FROM changefeed.lease l
                              WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance) THEN
        PERFORM changefeed.hold(c.id, processor, instance, duration);
    END IF;
END
$$;

-- What lease_renew() and lease_keep() do first: renew_holder() of the
-- processor's collection, which it returns.
CREATE OR REPLACE FUNCTION changefeed.renewed(tbl regclass, processor text, instance text, duration interval)
RETURNS changefeed.collection LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    PERFORM changefeed.renew_holder(c, processor, instance, duration);
    RETURN c;
END
$$;

-- Extends the leases `instance` still owns and returns them with their epochs.
-- A lease missing from the result was taken over: stop reading its range.
CREATE OR REPLACE FUNCTION changefeed.lease_renew(tbl regclass, processor text, instance text, duration interval)
RETURNS TABLE (range_id int, epoch bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.renewed(tbl, processor, instance, duration);
BEGIN
    RETURN QUERY SELECT s.range_id, s.epoch FROM changefeed.leases_since(c.id, processor, instance, NULL) s
                  WHERE s.range_id IS NOT NULL;
END
$$;

-- lease_renew() answered as leases_since(): "unchanged" when no lease of the
-- processor changed hands since generation `known`.  One row written and
-- one returned while nothing moves, whatever the number of ranges.
CREATE OR REPLACE FUNCTION changefeed.lease_keep(tbl regclass, processor text, instance text, duration interval,
                                                 known bigint DEFAULT NULL)
RETURNS TABLE (generation bigint, range_id int, epoch bigint)
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.renewed(tbl, processor, instance, duration);
BEGIN
    RETURN QUERY SELECT * FROM changefeed.leases_since(c.id, processor, instance, known);
END
$$;

-- Gives up leases (all of the instance's, or only `range_ids`) so that another
-- instance takes them over at once instead of waiting for expiry.  Giving up
-- all of them also ends the instance's expiry: it no longer counts as live
-- for balancing (unless registered).
CREATE OR REPLACE FUNCTION changefeed.lease_release(tbl regclass, processor text, instance text,
                                                    range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_leaving(tbl, processor, instance);
    n int;
BEGIN
    PERFORM changefeed.leases_moved(c.id, processor);
    PERFORM 1 FROM changefeed.lease l   -- in range order (see lease_checkpoint_many)
      WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance
        AND (range_ids IS NULL OR l.range_id = ANY (range_ids))
      ORDER BY l.range_id FOR NO KEY UPDATE;
    UPDATE changefeed.lease l
       SET owner = NULL, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.owner = instance
       AND (range_ids IS NULL OR l.range_id = ANY (range_ids));
    GET DIAGNOSTICS n = ROW_COUNT;
    IF range_ids IS NULL THEN
        DELETE FROM changefeed.holder h
         WHERE h.collection_id = c.id AND h.processor = processor AND h.instance = instance;
    END IF;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION changefeed.lease_lost(tbl regclass, processor text, range_id int, instance text, epoch bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'lease on range % of processor "%" on % is no longer held by "%" at epoch %',
                    range_id, processor, tbl, instance, epoch
        USING ERRCODE = 'CF010',
              HINT = 'Another instance took the lease over; its checkpoint is not moved.';
END
$$;

-- The fence of every write a range's owner makes to its lease (checkpoint,
-- backfill progress, resync): locks the lease row if `instance` still owns it
-- at `epoch`, else raises CF010 (lease_lost).  The caller then updates the row
-- by its key; the lock keeps the owner and epoch as checked until commit.
CREATE OR REPLACE FUNCTION changefeed.lease_fence(collection_id int, tbl regclass, processor text, range_id int,
                                                  instance text, epoch bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
    PERFORM 1 FROM changefeed.lease l
     WHERE l.collection_id = collection_id AND l.processor = processor AND l.range_id = range_id
       AND l.owner = instance AND l.epoch = epoch
       FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM changefeed.lease_lost(tbl, processor, range_id, instance, epoch);
    END IF;
END
$$;

-- Moves a range's checkpoint, only if `instance` still owns the lease at
-- `epoch` (CF010 otherwise).  The position is validated (CF004/CF005).
CREATE OR REPLACE FUNCTION changefeed.lease_checkpoint(tbl regclass, processor text, range_id int,
                                                       instance text, epoch bigint, "position" text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    IF "position" IS NULL THEN
        RAISE EXCEPTION 'position must not be null' USING ERRCODE = 'CF004';
    END IF;
    PERFORM changefeed.position_decode("position");
    PERFORM changefeed.lease_fence(c.id, tbl, processor, range_id, instance, epoch);
    UPDATE changefeed.lease l
       SET checkpoint = "position", updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = range_id;
END
$$;

-- Moves the checkpoints of many ranges in one call: range_ids[i] to
-- positions[i], each only if `instance` still owns it at epochs[i].  A range
-- that changed hands is not moved and does not stop the others: its id is
-- returned (the caller drops that range, as after CF010 from
-- lease_checkpoint).  Every position is validated first (CF004/CF005 for the
-- whole call); arrays of different lengths, nulls or a range twice: 22023.
CREATE OR REPLACE FUNCTION changefeed.lease_checkpoint_many(tbl regclass, processor text, instance text,
                                                            range_ids int[], epochs bigint[], positions text[])
RETURNS SETOF int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
    n int := coalesce(array_length(range_ids, 1), 0);
    held int[];
BEGIN
    IF range_ids IS NULL OR epochs IS NULL OR positions IS NULL
       OR coalesce(array_length(epochs, 1), 0) <> n OR coalesce(array_length(positions, 1), 0) <> n THEN
        RAISE EXCEPTION 'range_ids, epochs and positions must be arrays of the same length'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(range_ids, NULL) IS NOT NULL OR array_position(epochs, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'range ids and epochs must not be null' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(positions, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'position must not be null' USING ERRCODE = 'CF004';
    END IF;
    IF (SELECT count(DISTINCT x) FROM unnest(range_ids) x) <> n THEN
        RAISE EXCEPTION 'a range id must not be given twice' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM changefeed.position_decode(x) FROM unnest(positions) x;
    -- The fence of lease_fence() for all of them: the rows still ours at
    -- their epoch, locked in range order (the order lease_acquire locks in).
    SELECT coalesce(array_agg(h.range_id), '{}') INTO held FROM (
        SELECT l.range_id FROM changefeed.lease l
          JOIN unnest(range_ids, epochs) AS w(r, e) ON w.r = l.range_id
         WHERE l.collection_id = c.id AND l.processor = processor
           AND l.owner = instance AND l.epoch = w.e
         ORDER BY l.range_id
           FOR NO KEY UPDATE OF l) h;
    UPDATE changefeed.lease l
       SET checkpoint = w.pos, updated_at = now()
      FROM unnest(range_ids, positions) AS w(r, pos)
     WHERE l.collection_id = c.id AND l.processor = processor
       AND l.range_id = w.r AND w.r = ANY (held);
    RETURN QUERY SELECT w.r FROM unnest(range_ids) AS w(r) WHERE w.r <> ALL (held) ORDER BY 1;
END
$$;

-- Records backfill progress of a range (the primary key of the last row
-- delivered, as jsonb), fenced like lease_checkpoint().
CREATE OR REPLACE FUNCTION changefeed.lease_backfill_checkpoint(tbl regclass, processor text, range_id int,
                                                                instance text, epoch bigint, after jsonb,
                                                                rows_done bigint, done bool)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
BEGIN
    IF done IS NULL OR rows_done IS NULL OR rows_done < 0 THEN
        RAISE EXCEPTION 'done and rows_done must be given' USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.lease_fence(c.id, tbl, processor, range_id, instance, epoch);
    UPDATE changefeed.lease l
       SET backfill_after = coalesce(after, l.backfill_after), backfill_rows = rows_done,
           backfill_done = done, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = range_id;
END
$$;

-- Restarts a range as a backfill after its history was lost (the client's
-- `resync` option of the latest-version processor): the table's current rows
-- are scanned again, then the log continues from the position taken here.
-- Fenced like lease_checkpoint().  Returns that position.
CREATE OR REPLACE FUNCTION changefeed.lease_resync(tbl regclass, processor text, range_id int,
                                                   instance text, epoch bigint)
RETURNS text LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor, instance);
    pos text := changefeed.current_position();
BEGIN
    PERFORM changefeed.lease_fence(c.id, tbl, processor, range_id, instance, epoch);
    UPDATE changefeed.lease l
       SET checkpoint = pos, backfill_done = false, backfill_after = NULL, backfill_rows = 0,
           backfill_position = pos, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor AND l.range_id = range_id;
    RETURN pos;
END
$$;

-- The leases `instance` owns, with their checkpoints (what a restarted range
-- worker resumes from).
CREATE OR REPLACE FUNCTION changefeed.lease_owned(tbl regclass, processor text, instance text)
RETURNS TABLE (range_id int, epoch bigint, checkpoint text, backfill_done bool,
               backfill_after jsonb, backfill_rows bigint, backfill_position text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection;
BEGIN
    PERFORM changefeed.check_name(processor, 'processor');
    PERFORM changefeed.check_name(instance, 'instance');
    c := changefeed.processor_seen(tbl, processor);
    PERFORM changefeed.require_select(tbl, changefeed.caller(), 'run a processor on');
    RETURN QUERY SELECT * FROM changefeed.leases_held(c.id, processor, instance);
END
$$;

-- Moves a processor's checkpoints (all ranges, or `range_ids`) to `position`
-- (default: now), for its owner or an admin.  Every moved lease is freed with
-- a new epoch, so running instances are fenced and re-acquire from there.
-- Skipping changes this way is deliberate; the function says how many leases
-- moved.  A position whose history is lost is refused (CF006, CF019): the
-- processor would only halt on it.
CREATE OR REPLACE FUNCTION changefeed.reset_checkpoint(tbl regclass, processor text, "position" text DEFAULT NULL,
                                                       range_ids int[] DEFAULT NULL)
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.processor_of(tbl, processor);
    pos text := coalesce("position", changefeed.current_position());
BEGIN
    PERFORM changefeed.check_range_ids(c, range_ids);
    PERFORM changefeed.check_history(c, (changefeed.position_decode(pos)).lo);
    RETURN changefeed.restart_leases(c, processor, range_ids, pos, backfill => false);
END
$$;

-- What reset_checkpoint() and resync_processor() do once their checks
-- passed (check_range_ids among them): the processor's leases (all, or `range_ids`) restart from `pos`,
-- as a backfill of the table first if `backfill`, each freed with a new
-- epoch so that running instances are fenced.  Returns how many moved;
-- CF012 for a processor that never ran.
CREATE OR REPLACE FUNCTION changefeed.restart_leases(c changefeed.collection, processor text, range_ids int[], pos text,
                                                     backfill bool) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    n int;
BEGIN
    PERFORM changefeed.leases_moved(c.id, processor);
    PERFORM 1 FROM changefeed.lease l   -- in range order (see lease_checkpoint_many)
      WHERE l.collection_id = c.id AND l.processor = processor
        AND (range_ids IS NULL OR l.range_id = ANY (range_ids))
      ORDER BY l.range_id FOR NO KEY UPDATE;
    UPDATE changefeed.lease l
       SET checkpoint = pos, owner = NULL, epoch = l.epoch + 1,
           backfill_done = NOT backfill, backfill_after = NULL,
           backfill_rows = CASE WHEN backfill THEN 0 ELSE l.backfill_rows END,
           backfill_position = CASE WHEN backfill THEN pos END, updated_at = now()
     WHERE l.collection_id = c.id AND l.processor = processor
       AND (range_ids IS NULL OR l.range_id = ANY (range_ids));
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n = 0 THEN
        RAISE EXCEPTION 'processor "%" has never run on %', processor, c.relid::regclass
            USING ERRCODE = 'CF012', HINT = 'Leases are created when a processor first starts.';
    END IF;
    RETURN n;
END
$$;

-- Removes whatever is filed under processor `processor` of collection
-- `collection_id`: deduplication records, leases and checkpoints, holders,
-- instances.  The caller holds the processor row's exclusive lock, taken
-- after every claim in flight committed, and these statements read in
-- snapshots taken after it: nothing a claim filed escapes them.
CREATE OR REPLACE FUNCTION changefeed.forget_filed(collection_id int, processor text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
BEGIN
    DELETE FROM changefeed.applied a WHERE a.collection_id = collection_id AND a.processor = processor;
    DELETE FROM changefeed.lease l WHERE l.collection_id = collection_id AND l.processor = processor;
    DELETE FROM changefeed.holder h WHERE h.collection_id = collection_id AND h.processor = processor;
    DELETE FROM changefeed.instance i WHERE i.collection_id = collection_id AND i.processor = processor;
END
$$;

-- 25000 in a transaction whose snapshot is older than its statement
-- (REPEATABLE READ, SERIALIZABLE): what `what` removes would be read there,
-- and a claim committed after it would survive.
CREATE OR REPLACE FUNCTION changefeed.require_fresh_snapshot(what text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION '% needs a READ COMMITTED transaction', what
            USING ERRCODE = 'invalid_transaction_state',
                  DETAIL = format('Under %s it would read what is filed under the name in the transaction''s '
                                  'snapshot and miss what was filed since.',
                                  upper(current_setting('transaction_isolation'))),
                  HINT = 'Call it in a READ COMMITTED transaction (the default) or on its own.';
    END IF;
END
$$;

-- Forgets a processor: its leases, checkpoints, registered instances,
-- deduplication store (processors/dedup.sql) and owner (for its owner or an admin).
-- It waits for every call in flight under the name (processor_owner).
CREATE OR REPLACE FUNCTION changefeed.drop_processor(tbl regclass, processor text) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    owner oid;
BEGIN
    PERFORM changefeed.check_name(processor, 'processor');
    PERFORM changefeed.require_fresh_snapshot('drop_processor()');
    owner := changefeed.processor_owner(c.id, processor, 'exclusive');
    IF owner IS NULL THEN
        PERFORM changefeed.processor_unknown(tbl, processor);
    END IF;
    PERFORM changefeed.require_owner(tbl, processor, changefeed.caller(), owner);
    PERFORM changefeed.forget_filed(c.id, processor);
    DELETE FROM changefeed.processor p WHERE p.collection_id = c.id AND p.name = processor;
    RETURN FOUND;
END
$$;

-- Gives processor name `processor` on `tbl` to role `owner` (admin only).
-- Before anyone started it, this reserves the name: another role's
-- lease_init() under it is refused (42501), so a name cannot be squatted
-- before its service first starts.  A name another role holds already changes
-- hands, and whatever was filed under it (leases and checkpoints, instances,
-- deduplication records) is dropped: the new owner starts afresh, from its
-- own lease_init(), and nothing the previous holder did reaches it.  Returns
-- whether the name changed hands (false: `owner` had it already).
-- Claims serialize with it on the processor row: it waits for a first claim
-- in flight (the insert below) and for every call filing under the name (the
-- exclusive lock), removes what they filed, and replaces the row (a delete
-- and an insert), so that a claim that comes after, even one whose snapshot
-- is older, finds the new owner or fails (processor_owner).
CREATE OR REPLACE FUNCTION changefeed.reserve_processor(tbl regclass, processor text, owner regrole) RETURNS bool
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_variable
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    held changefeed.processor;
BEGIN
    PERFORM changefeed.require_admin(changefeed.caller(), 'reserve processor names');
    PERFORM changefeed.check_name(processor, 'processor');
    IF owner IS NULL THEN
        RAISE EXCEPTION 'owner must not be null' USING ERRCODE = 'CF003';
    END IF;
    PERFORM changefeed.require_fresh_snapshot('reserve_processor()');
    INSERT INTO changefeed.processor AS p (collection_id, name, owner_role)
    VALUES (c.id, processor, owner)
    ON CONFLICT ON CONSTRAINT processor_pkey DO NOTHING;
    IF FOUND THEN
        -- A new name: nothing is filed under it but what predates the claims.
        PERFORM changefeed.forget_filed(c.id, processor);
        RETURN true;
    END IF;
    FOR attempt IN 1..2 LOOP
        SELECT * INTO held FROM changefeed.processor p
         WHERE p.collection_id = c.id AND p.name = processor FOR UPDATE;
        EXIT WHEN FOUND;
    END LOOP;
    IF held.owner_role = owner THEN
        RETURN false;
    END IF;
    PERFORM changefeed.forget_filed(c.id, processor);
    DELETE FROM changefeed.processor p WHERE p.collection_id = c.id AND p.name = processor;
    INSERT INTO changefeed.processor AS p (collection_id, name, owner_role, lease_generation)
    VALUES (c.id, processor, owner, coalesce(held.lease_generation + 1, 0));
    RETURN true;
END
$$;
