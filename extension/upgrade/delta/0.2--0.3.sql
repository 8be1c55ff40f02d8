-- changefeed: upgrade from release 0.2 to 0.3, the part written by hand.
--
-- The upgrade script (extension/changefeed--0.2--0.3.sql) is built from this
-- delta and extension/sql/ (extension/build_sql.py): at the line
-- `-- @functions` below go every function, view and event trigger of the
-- concern files and the SQL surface of extension/surface.manifest.
-- What CREATE OR REPLACE cannot do is written here: tables, columns and their
-- data, objects that went, functions whose arguments or result changed (the
-- old one is dropped first).  test/stages/upgrade.sh checks that an
-- upgraded database ends with the objects of a fresh install.

-- ---- read(): jsonpath filters in the C reader ----
-- read_windows() evaluates read()'s filter in its scan; the SQL twin of its
-- filter test is gone (read/read.sql).
DROP FUNCTION changefeed.filter_matches("char", jsonb, jsonb, jsonpath, jsonb);

-- ---- disable() keeps, ranges change ----
-- disable() keeps the collection (its id, channel, processors' leases and
-- checkpoints, deduplication records, logged changes) unless forget => true;
-- enable() resumes it; a gap in capture is recorded in the horizon (cause
-- 'disabled') and reported as history lost.  The ranges of a live collection
-- change with alter(..., ranges => n) (maintenance/ranges.sql).
ALTER TABLE changefeed.collection ADD COLUMN disabled_at timestamptz, ADD COLUMN disabled_txid xid8,
                                   ADD COLUMN disabled_marks jsonb;
ALTER TABLE changefeed.horizon ADD COLUMN cause text NOT NULL DEFAULT 'retention',
                               ADD COLUMN disabled_from timestamptz;
-- New arguments: raise_horizon() takes a cause, disable() forget, alter() ranges.
DROP FUNCTION changefeed.raise_horizon(int, xid8, timestamptz);
DROP FUNCTION changefeed.disable(regclass);
DROP FUNCTION changefeed._disable(regclass);
DROP FUNCTION changefeed.alter(regclass, interval, bool, text);
DROP FUNCTION changefeed._alter(regclass, interval, bool, text);

-- ---- the position key in the database ----
-- 0.2 kept the key in the data directory (changefeed_position.key, made on
-- first use): a standby made before that had none, or made its own.  The
-- key moves into the database (filled below, once its function exists).
CREATE TABLE changefeed.position_key (
    key     bytea NOT NULL CHECK (length(key) = 32),
    one_row bool NOT NULL DEFAULT true PRIMARY KEY CHECK (one_row)
);

-- ---- canonical document identity ----
-- Capture, expiry and backfill make doc_id, partition_key and tenant with
-- fixed output settings from now on (capture/identity.sql, identity.cpp).  Logged
-- rows keep the ids they were written with: nothing to convert here
-- (CHANGELOG.md says what changes for keys of date/time, float and bytea
-- types).  canonical_text() and the enable() check come with @functions.

-- ---- tenants: a row that moves between tenants ----
-- It is logged as op 'm' with the tenant it left (read/read.sql, processors/status.sql).
ALTER TABLE changefeed.log ADD COLUMN previous_tenant text;

-- ---- partition retention: partition_drops ----
-- A DROP or DETACH of a partition of an enabled table is refused, expired or
-- forgotten as the collection says (guard/guard.sql, partition_drops.cpp);
-- enable() and alter() take the option.
ALTER TABLE changefeed.collection ADD COLUMN partition_drops text NOT NULL DEFAULT 'refuse'
    CHECK (partition_drops IN ('refuse', 'expire', 'forget'));
-- enable() of 0.2 (alter() of 0.2 is dropped above).
DROP FUNCTION changefeed.enable(regclass, text[], int, interval, bool, text, text, bool);
DROP FUNCTION changefeed._enable(regclass, text[], int, interval, bool, text, text, bool);

-- ---- images: keys only ----
-- A collection may log keys alone (images => 'keys'): the latest-version
-- feed reads the current row at read time (read_window.cpp, current_rows.cpp).
ALTER TABLE changefeed.collection ADD COLUMN images text NOT NULL DEFAULT 'full'
    CHECK (images IN ('full', 'keys'));
-- (enable() and alter() take it: 0.2's are dropped above.)

-- ---- one expiry per instance, balancing steps that answer "unchanged" ----
-- A lease is live while its owner's row in changefeed.holder is unexpired
-- (processors/leases.sql): a renewal is one row update, not one per range.  The
-- processor's lease_generation moves with every change of owner or epoch,
-- so an idle step or renewal answers "unchanged" without reading the leases.
ALTER TABLE changefeed.processor ADD COLUMN lease_generation bigint NOT NULL DEFAULT 0;
-- @table changefeed.holder
-- Each owner keeps the latest expiry of its leases.
INSERT INTO changefeed.holder (collection_id, processor, instance, expires_at)
SELECT l.collection_id, l.processor, l.owner, pg_catalog.max(l.expires_at)
  FROM changefeed.lease l
 WHERE l.owner IS NOT NULL AND l.expires_at IS NOT NULL
 GROUP BY 1, 2, 3;
-- The leases' own expiry is no longer read (the column stays, so that dumps
-- of 0.2 restore).
UPDATE changefeed.lease SET expires_at = NULL WHERE expires_at IS NOT NULL;
-- ---- schema versions ----
-- Every shape of an enabled table is a version (capture/schema.sql); each log row
-- records the one it was written under, and the collection the one in force.
-- Rows logged before the update have none and are read as the first version,
-- the shape each table has at the update.
ALTER TABLE changefeed.collection ADD COLUMN schema_version int NOT NULL DEFAULT 1;
ALTER TABLE changefeed.log ADD COLUMN schema_version int;
ALTER TABLE changefeed.log ADD COLUMN previous_partition_key text;
-- @table changefeed.schema_version
SELECT pg_catalog.pg_extension_config_dump('changefeed.schema_version', '');
-- ---- the read index orders a transaction's rows by seq ----
-- The pages of one large transaction each enter it where the last one ended
-- (read/window_scan.cpp).  Rebuilt on every partition: writers wait for it.
DROP INDEX changefeed.log_read_idx;
CREATE INDEX log_read_idx ON changefeed.log (collection_id, range_id, txid, seq);
-- ---- instances behind a transaction pooler ----
-- A registration may be held for a time instead of by its session
-- (processors/instances.sql): instance_register() takes the hold.
ALTER TABLE changefeed.instance ADD COLUMN held_until timestamptz;
DROP FUNCTION changefeed.instance_register(regclass, text, text, text);
DROP FUNCTION changefeed._instance_register(regclass, text, text, text);
-- ---- Citus: shards captured where they are ----
-- scale_out/citus.sql: a distributed table of the coordinator, a shard
-- placement of a worker, and the placements a worker has captured.
ALTER TABLE changefeed.collection ADD COLUMN citus text CHECK (citus IN ('distributed', 'shard'));
-- @table changefeed.shard_placement
CREATE INDEX shard_placement_shard_idx ON changefeed.shard_placement (shard_id, created_at);
SELECT pg_catalog.pg_extension_config_dump('changefeed.shard_placement', '');
-- scale_out/collect.sql: what the coordinator has read of each placement.
-- @table changefeed.collected_placement
-- @table changefeed.collected_shard

-- @functions

-- ---- the position key in the database ----
-- An existing file's key is taken over, so positions stored under 0.2 stay
-- valid.
DO $$
DECLARE
    file_key bytea := pg_catalog.pg_read_binary_file('changefeed_position.key', 0, 64, true);
BEGIN
    IF file_key IS NOT NULL AND pg_catalog.length(file_key) <> 32 THEN
        RAISE EXCEPTION 'position key file "changefeed_position.key" holds % bytes instead of 32',
            pg_catalog.length(file_key)
            USING HINT = 'Restore the file from a backup of this cluster before the update.';
    END IF;
    INSERT INTO changefeed.position_key (key) VALUES (coalesce(file_key, changefeed._new_position_key()));
END
$$;

-- ---- tenants: bindings that hold ----
-- Bound roles hold a grant that makes DROP ROLE refuse them, and DROP OWNED
-- gives it back (access/access.sql).  Bindings of roles dropped before this
-- version go; the others get the grant.
DELETE FROM changefeed.tenant_binding b WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid = b.role_id);
DO $$
DECLARE
    r regrole;
BEGIN
    FOR r IN SELECT role_id FROM changefeed.tenant_binding LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION changefeed.tenant_binding_held() TO %s', r);
    END LOOP;
END
$$;

-- ---- read_ranges(): a long poll ----
-- read_ranges() takes `wait` (extension/read/read_window.cpp): its entry point and
-- implementation of 0.2 go.
DROP FUNCTION changefeed.read_ranges(regclass, int[], text[], int, text, text);
DROP FUNCTION changefeed._read_ranges(regclass, int[], text[], int, text, text);

-- ---- read(): filter_moves ----
-- A filtered read delivers a replace that enters or leaves the filter's view
-- as a create or a delete (extension/read/window_filter.cpp): read() takes
-- filter_moves, its entry point and implementation of 0.2 go.
DROP FUNCTION changefeed.read(regclass, text, int, int[], text, jsonpath, jsonb, text[], text);
DROP FUNCTION changefeed._read(regclass, text, int, int[], text, jsonpath, jsonb, text[], text);

-- ---- the log keeps rows of up to a page whole ----
-- The partitions of 0.2 take the toast_tuple_target new ones are made with
-- (log/catalog.sql); rows written already stay as they are.
DO $$
DECLARE
    p regclass;
BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_catalog.pg_inherits
              WHERE inhparent = 'changefeed.log'::regclass LOOP
        PERFORM changefeed.keep_log_rows_whole(p);
    END LOOP;
END
$$;

-- The first version of every collection is its table's shape now.
INSERT INTO changefeed.schema_version (collection_id, version, columns, key)
SELECT c.id, 1, changefeed.columns_now(c.relid), c.key_columns
  FROM changefeed.collection c
 WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_class r WHERE r.oid = c.relid);
