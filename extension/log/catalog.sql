-- changefeed: catalog (collections, the change log, its partitions).
\echo Use "CREATE EXTENSION changefeed" to load this file. \quit

-- The schema belongs to the extension, so pg_dump leaves it to CREATE EXTENSION.
CREATE SCHEMA changefeed;

-- One row per enabled table, and per table disabled with its state kept
-- (disable(tbl), see capture/enable.sql): such a collection keeps its id, channel,
-- leases and logged changes, captures nothing, and fails reads with CF002
-- until enable() resumes it.  The ranges change only through alter(), which
-- moves the logged changes and the checkpoints with them (maintenance/ranges.sql).
-- The table is a regclass, so a dump names it and a restore finds it again;
-- ids survive a restore with their sequence (the capture triggers carry them).
CREATE SEQUENCE changefeed.collection_id_seq AS int;
CREATE TABLE changefeed.collection (
    id              int NOT NULL DEFAULT nextval('changefeed.collection_id_seq') PRIMARY KEY,
    relid           regclass NOT NULL UNIQUE,
    key_columns     text[] NOT NULL,
    partition_key   text[] NOT NULL,
    ranges          int NOT NULL DEFAULT 16,
    retention       interval NOT NULL DEFAULT '7 days',
    keep_previous   bool NOT NULL DEFAULT true,
    tenant_column   text,
    ttl_column      text,
    enabled_at      timestamptz NOT NULL DEFAULT now(),
    -- Whether writes made in replica mode (logical replication apply) are
    -- captured; without it they are refused (CF014).
    replicated      bool NOT NULL DEFAULT false,
    -- Types of the columns capture depends on (key, partition key, tenant,
    -- TTL) when capture was installed: {"column": "type"}; the guard and
    -- verify() compare against it.
    column_types    jsonb NOT NULL DEFAULT '{}',
    -- Set while capture is off and the state kept (disable(tbl)); the
    -- disabling transaction and what it had written to the table then
    -- (write_marks()), so that an enable() in that same transaction, which no
    -- other writer could get between, is no gap unless it wrote meanwhile.
    disabled_at     timestamptz,
    disabled_txid   xid8,
    disabled_marks  jsonb,
    -- What a DROP or DETACH of one of its partitions does (guard/guard.sql):
    -- 'refuse' it (CF013), 'expire' its rows (logged as deletes with
    -- ttl_expired) or 'forget' them (nothing logged).
    partition_drops text NOT NULL DEFAULT 'refuse'
                    CHECK (partition_drops IN ('refuse', 'expire', 'forget')),
    -- What the log holds of a change: 'full' images (current, and previous
    -- when keep_previous), or 'keys' alone (key, operation, position): the
    -- latest-version feed then reads the current row from the table at read
    -- time, and the all-versions feed is refused (CF021).
    images          text NOT NULL DEFAULT 'full' CHECK (images IN ('full', 'keys')),
    -- The version of the table's shape that capture writes under now
    -- (changefeed.schema_version, capture/schema.sql).
    schema_version  int NOT NULL DEFAULT 1,
    -- On a Citus cluster (scale_out/citus.sql): 'distributed', a
    -- hash-distributed table of the coordinator, whose shards are captured
    -- where they are; 'shard', a shard placement of a worker.  Null: any
    -- other table.
    citus           text CHECK (citus IN ('distributed', 'shard'))
);

-- Every shape an enabled table had: its columns by identity (attnum, with
-- the name and type each had then) and its key, one row per version.  Each
-- log row records the version it was written under, so privileges and
-- policies judge an old image by what its columns are, not by today's names
-- (reader_sight.cpp).  Dumped with the collections.
CREATE TABLE changefeed.schema_version (
    collection_id   int NOT NULL,
    version         int NOT NULL,
    -- [{"attnum": n, "name": "...", "type": "..."}, ...] in attnum order
    columns         jsonb NOT NULL,
    key             text[] NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    -- The seq of a schema change row of the version (null for the first):
    -- rows of the table logged before it have smaller seqs, those after it
    -- larger ones (the DDL holds the table's lock meanwhile), so a row
    -- logged without a version is of the last version since before its seq.
    since_seq       bigint,
    PRIMARY KEY (collection_id, version)
);

-- Per collection, the newest transaction whose changes retention dropped.
-- A position that has not delivered everything up to it has lost history.
-- Not dumped: a restored database starts with an empty log and positions of
-- its own (old ones are foreign there), and these transaction ids would mean
-- nothing on another cluster.
CREATE TABLE changefeed.horizon (
    collection_id   int PRIMARY KEY,
    dropped_txid    xid8 NOT NULL,
    dropped_before  timestamptz NOT NULL,   -- the dropped rows were written before this
    dropped_at      timestamptz NOT NULL DEFAULT now(),
    -- Why the changes are missing: 'retention' dropped them, or 'disabled':
    -- capture was off from disabled_from until dropped_before (the enable()
    -- of transaction dropped_txid), so writes of that time were never logged.
    cause           text NOT NULL DEFAULT 'retention',
    disabled_from   timestamptz
);

-- Ticks: snapshots the notifier records as changes commit (every
-- changefeed.tick_rows changes or changefeed.tick_interval, whichever first).
-- A reader far behind reads window by window between ticks instead of one
-- window up to now, so a backlog is paged in bounded windows.
CREATE TABLE changefeed.tick (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    snap_xmax xid8 NOT NULL,
    snap    pg_snapshot NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tick_xmax_idx ON changefeed.tick (snap_xmax);

-- The ordered change log shared by all collections.  Partitioned by time so
-- that retention drops whole partitions instead of deleting rows.
-- seq has no cache: a cached sequence would hand a later write of a row a
-- smaller number than an earlier one made in another session.
CREATE SEQUENCE changefeed.log_seq AS bigint CACHE 1;

CREATE TABLE changefeed.log (
    seq             bigint NOT NULL DEFAULT nextval('changefeed.log_seq'),
    txid            xid8 NOT NULL,
    collection_id   int NOT NULL,
    range_id        int NOT NULL,
    doc_id          text,            -- null for a clear (TRUNCATE)
    partition_key   text,
    -- c create, r replace, d delete, t clear, s schema change (current holds
    -- the change, one row per range); m a replace that moved the row
    -- to another tenant (previous_tenant: the one it left, null for none);
    -- x the copy of a replace that changed the partition key, in the range
    -- and under the key it had before (delivered only as the delete of a
    -- reader whose sight the row left)
    op              "char" NOT NULL,
    current         jsonb,
    previous        jsonb,
    ttl_expired     bool NOT NULL DEFAULT false,
    written_at      timestamptz NOT NULL DEFAULT now(),
    tenant          text,
    previous_tenant text,
    -- The collection's schema version the images were written under (null:
    -- written before versions were kept, or by a writer that found the
    -- catalog locked: read as the version in force at its seq, since_seq).
    schema_version  int,
    -- A replace that changed the partition key: the key before (null
    -- otherwise).  A reader whose sight the row leaves gets a delete with it,
    -- never the key the row went to.
    previous_partition_key text
) PARTITION BY RANGE (written_at);

-- Sets a partition of the log to keep rows of up to a page whole (below).
CREATE OR REPLACE FUNCTION changefeed.keep_log_rows_whole(part regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    -- The largest target a page allows: the block size less the page header
    -- and one line pointer (8160 for 8 kB pages).
    EXECUTE format('ALTER TABLE %s SET (toast_tuple_target = %s)', part,
                   least(8160, current_setting('block_size')::int - 32));
END
$$;

-- The only index: reads select a collection's ranges by transaction id, and
-- a transaction's rows in seq order, so that the pages of one large
-- transaction each enter it where the last one ended (read/window_scan.cpp).
-- Every index is paid by every captured write.
CREATE INDEX log_read_idx ON changefeed.log (collection_id, range_id, txid, seq);

-- Rows whose day has no partition yet land here, so a write never fails for
-- lack of a partition; maintain() keeps it empty in normal operation.
-- Every partition keeps rows of up to a page whole (toast_tuple_target, the
-- largest a page allows): a change of a 2 KB document carries two images, and
-- at the default target capture would try to compress both and move one to
-- the TOAST table, a second heap and index insert per change, undone by every
-- read.  Larger rows are toasted as before.
CREATE TABLE changefeed.log_default PARTITION OF changefeed.log DEFAULT;
SELECT changefeed.keep_log_rows_whole('changefeed.log_default');

-- Creates the daily partitions from yesterday up to `days_ahead` days ahead.
-- Returns how many partitions it created.  Each new partition is made a member
-- of the extension, so that pg_dump leaves it out (a restore's CREATE
-- EXTENSION and the next maintenance make their own); retention removes it
-- from the extension before dropping it.  Only the extension's owner (or a
-- superuser) may do that: maintenance runs as one.
CREATE OR REPLACE FUNCTION changefeed.create_partitions(days_ahead int DEFAULT 7, as_of timestamptz DEFAULT now())
RETURNS int LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    d date;
    name text;
    created int := 0;
BEGIN
    IF days_ahead IS NULL OR days_ahead < 0 OR days_ahead > 366 THEN
        RAISE EXCEPTION 'days_ahead must be between 0 and 366, not %', days_ahead
            USING ERRCODE = 'CF003';
    END IF;
    IF as_of IS NULL OR NOT isfinite(as_of) THEN
        RAISE EXCEPTION 'as_of must be a finite time, not %', coalesce(as_of::text, 'null')
            USING ERRCODE = 'CF003', HINT = 'Pass a time, e.g. now().';
    END IF;
    -- Days are UTC days: capture routes rows by the UTC day of now().
    FOR d IN SELECT generate_series((as_of AT TIME ZONE 'UTC')::date - 1,
                                    (as_of AT TIME ZONE 'UTC')::date + days_ahead, '1 day')::date LOOP
        name := 'log_' || to_char(d, 'YYYYMMDD');
        IF to_regclass(format('changefeed.%I', name)) IS NULL THEN
            -- Rows of that day already sit in the default partition (maintenance
            -- did not run in time): leave them there; retention prunes them.
            IF EXISTS (SELECT 1 FROM changefeed.log_default
                        WHERE written_at >= d::timestamp AT TIME ZONE 'UTC'
                          AND written_at < (d + 1)::timestamp AT TIME ZONE 'UTC') THEN
                RAISE WARNING 'changefeed: rows of % are in the default partition; no partition created for that day', d;
                CONTINUE;
            END IF;
            EXECUTE format('CREATE TABLE changefeed.%I PARTITION OF changefeed.log FOR VALUES FROM (%L) TO (%L)',
                           name, d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
            PERFORM changefeed.keep_log_rows_whole(format('changefeed.%I', name)::regclass);
            -- Inside CREATE EXTENSION the new table is a member already.
            IF NOT EXISTS (SELECT 1 FROM pg_depend
                            WHERE classid = 'pg_class'::regclass
                              AND objid = format('changefeed.%I', name)::regclass
                              AND refclassid = 'pg_extension'::regclass AND deptype = 'e') THEN
                EXECUTE format('ALTER EXTENSION changefeed ADD TABLE changefeed.%I', name);
            END IF;
            created := created + 1;
        END IF;
    END LOOP;
    RETURN created;
END
$$;

-- Partitions from the start (after a restore too, where the first captured
-- writes may come before any maintenance).
SELECT changefeed.create_partitions(7);

SELECT pg_catalog.pg_extension_config_dump('changefeed.collection', '');
SELECT pg_catalog.pg_extension_config_dump('changefeed.collection_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('changefeed.schema_version', '');
