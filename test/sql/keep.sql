-- disable() keeps what consumers need: the collection's id and channel, its
-- processors' leases, checkpoints and deduplication records, its logged
-- changes.  enable() resumes it (other options allowed); positions from
-- before the gap report history lost; forget => true and DROP TABLE drop it.
-- Tried as the roles that would do it.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE ROLE regress_keep_owner LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_keep_proc LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_keep_other LOGIN IN ROLE changefeed_processor;
GRANT CREATE ON SCHEMA public TO regress_keep_owner;
RESET client_min_messages;

SET ROLE regress_keep_owner;
CREATE TABLE kept (id int PRIMARY KEY, v int);
GRANT SELECT ON kept TO regress_keep_proc, regress_keep_other;
SELECT changefeed.enable('kept', ranges => 4) AS first_id \gset
RESET ROLE;
INSERT INTO kept SELECT g, 0 FROM generate_series(1, 20) g;

-- A processor consumes everything written so far.
SET ROLE regress_keep_proc;
SELECT changefeed.lease_init('kept', 'proj');
SELECT count(*) AS acquired FROM changefeed.lease_acquire('kept', 'proj', 'pod-1', '1 minute');
SELECT count(*) AS changed_hands FROM changefeed.lease_checkpoint_many('kept', 'proj', 'pod-1', '{0,1,2,3}', '{1,1,1,1}',
       ARRAY(SELECT changefeed.current_position() FROM generate_series(1, 4)));
SELECT changefeed.dedup_record('kept', 'proj', '{a.1.1}');
RESET ROLE;
SELECT changefeed.current_position() AS pos_before, clock_timestamp() AS at_before \gset
SELECT count(*) AS logged FROM changefeed.log WHERE collection_id = :first_id \gset

-- Only the table's owner (or an admin) disables.
SET ROLE regress_keep_other;
SELECT try($$SELECT changefeed.disable('kept')$$);
SET ROLE regress_keep_proc;
SELECT try($$SELECT changefeed.disable('kept', forget => true)$$);
SET ROLE regress_keep_owner;
SELECT try($$SELECT changefeed.disable('kept', forget => NULL)$$);
SELECT changefeed.disable('kept');
-- Disabling again keeps it as it is.
SELECT changefeed.disable('kept');
RESET ROLE;

-- The collection, its channel, leases (fenced: no owner, a new epoch),
-- processor, deduplication records and logged changes are all still there;
-- the capture triggers are gone.
SELECT id = :first_id AS same_id, channel = 'changefeed_' || id AS same_channel,
       enabled, disabled_at IS NOT NULL AS disabled_at_set, ranges
  FROM changefeed.collections WHERE table_name = 'kept'::regclass;
SELECT range_id, owner, epoch, checkpoint IS NOT NULL AS has_checkpoint
  FROM changefeed.lease WHERE processor = 'proj' ORDER BY range_id;
SELECT count(*) AS processors FROM changefeed.processor WHERE name = 'proj';
SELECT count(*) AS applied FROM changefeed.applied WHERE processor = 'proj';
SELECT count(*) = :logged AS log_kept FROM changefeed.log
 WHERE collection_id = :first_id;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'kept'::regclass AND tgname LIKE 'changefeed%';
-- verify() lists enabled tables only; maintenance goes on.
SELECT count(*) AS verified FROM changefeed.verify() WHERE table_name = 'kept'::regclass;
SELECT failed_steps FROM changefeed.maintain();

-- Writes while disabled are not captured.
INSERT INTO kept VALUES (100, 1);
UPDATE kept SET v = 2 WHERE id = 1;
SELECT count(*) = :logged AS nothing_logged FROM changefeed.log
 WHERE collection_id = :first_id;

-- Every entry point says the table is not enabled (CF002).
SET ROLE regress_keep_proc;
SELECT try($$SELECT * FROM changefeed.read('kept', changefeed.current_position())$$);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT try($$SELECT * FROM changefeed.read_ranges('kept', '{0}', ARRAY[changefeed.current_position()])$$);
COMMIT;
SELECT try($$SELECT changefeed.lease_init('kept', 'proj')$$);
SELECT try($$SELECT * FROM changefeed.lease_acquire('kept', 'proj', 'pod-1', '1 minute')$$);
SELECT try($$SELECT * FROM changefeed.lease_renew('kept', 'proj', 'pod-1', '1 minute')$$);
SELECT try($$SELECT changefeed.lease_checkpoint('kept', 'proj', 0, 'pod-1', 2, changefeed.current_position())$$);
SELECT try($$SELECT * FROM changefeed.lag('kept', 'proj')$$);
SELECT try($$SELECT * FROM changefeed.backfill_page('kept', 0, NULL)$$);
SELECT try($$SELECT changefeed.position_at('kept', now())$$);
SELECT try($$SELECT * FROM changefeed.dedup_applied('kept', 'proj', '{a.1.1}')$$);
SET ROLE regress_keep_owner;
SELECT try($$SELECT changefeed.alter('kept', retention => '1 day')$$);
-- Only the owner (or an admin) resumes it.
SET ROLE regress_keep_other;
SELECT try($$SELECT changefeed.enable('kept')$$);
RESET ROLE;

-- enable() resumes the same collection, with other options, and the
-- processor's checkpoints carried over to the new ranges.
SET ROLE regress_keep_owner;
SELECT changefeed.enable('kept', ranges => 8, retention => '3 days', keep_previous => false)
       = :first_id AS same_id;
RESET ROLE;
SELECT enabled, disabled_at, ranges, retention, keep_previous
  FROM changefeed.collections WHERE table_name = 'kept'::regclass;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'kept'::regclass AND tgname LIKE 'changefeed%';
SELECT count(*) AS leases, count(DISTINCT checkpoint) AS checkpoints, min(epoch) AS epoch, max(epoch)
  FROM changefeed.lease WHERE processor = 'proj';
SELECT count(*) AS applied FROM changefeed.applied WHERE processor = 'proj';
-- The gap is on record.
SELECT cause, disabled_from IS NOT NULL AS has_from, dropped_before > disabled_from AS ordered
  FROM changefeed.horizons WHERE table_name = 'kept'::regclass;

-- A position from before the disable reports the gap, never skips it: read,
-- the processor's own checkpoints (lag, a read from them), a start time.
SET ROLE regress_keep_proc;
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'kept', :'pos_before'));
SELECT count(*) AS acquired FROM changefeed.lease_acquire('kept', 'proj', 'pod-1', '1 minute');
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'kept',
                  (SELECT checkpoint FROM changefeed.lease_owned('kept', 'proj', 'pod-1') LIMIT 1)));
SELECT bool_and(history_lost) AS all_lost, count(*) AS ranges FROM changefeed.lag('kept', 'proj');
SELECT try(format('SELECT changefeed.position_at(%L, %L)', 'kept', :'at_before'));
-- A position taken after the enable reads normally.
SELECT changefeed.current_position() AS pos_after, clock_timestamp() AS at_after \gset
RESET ROLE;
INSERT INTO kept VALUES (200, 1);
UPDATE kept SET v = 3 WHERE id = 2;
SET ROLE regress_keep_proc;
SELECT operation, doc_id, current, previous FROM changefeed.read('kept', :'pos_after')
 ORDER BY seq;
-- So does a start time after it.
SELECT count(*) AS since_enable FROM changefeed.read('kept', changefeed.position_at('kept', :'at_after'));
RESET ROLE;

-- disable() and enable() in one transaction leave no gap: writers wait for
-- the lock until commit.  The position taken after the first enable still
-- reads, and sees the writes on both sides.
SELECT dropped_txid AS horizon_before FROM changefeed.horizon WHERE collection_id = :first_id \gset
SET ROLE regress_keep_owner;
BEGIN;
SELECT changefeed.disable('kept');
SELECT changefeed.enable('kept', ranges => 8, retention => '5 days') = :first_id AS same_id;
COMMIT;
RESET ROLE;
INSERT INTO kept VALUES (201, 1);
SELECT dropped_txid = :'horizon_before' AS horizon_unchanged FROM changefeed.horizon WHERE collection_id = :first_id;
SET ROLE regress_keep_proc;
SELECT operation, doc_id FROM changefeed.read('kept', :'pos_after') ORDER BY seq;
RESET ROLE;
-- A write of that transaction itself between the two, or a TRUNCATE, was not
-- captured: a gap.
SELECT changefeed.current_position() AS pos_own \gset
SET ROLE regress_keep_owner;
BEGIN;
SELECT changefeed.disable('kept');
RESET ROLE;
INSERT INTO kept VALUES (202, 1);
SET ROLE regress_keep_owner;
SELECT changefeed.enable('kept', ranges => 8, retention => '5 days') IS NOT NULL;
COMMIT;
RESET ROLE;
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'kept', :'pos_own'));
SELECT changefeed.current_position() AS pos_own \gset
BEGIN;
SELECT changefeed.disable('kept');
TRUNCATE kept;
SELECT changefeed.enable('kept', ranges => 8, retention => '5 days') IS NOT NULL;
COMMIT;
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'kept', :'pos_own'));
-- A new partition key in that same transaction is a gap all the same: the
-- logged changes were placed by the old one.
SELECT changefeed.current_position() AS pos_mid \gset
SET ROLE regress_keep_owner;
BEGIN;
SELECT changefeed.disable('kept');
SELECT changefeed.enable('kept', partition_key => '{v}', ranges => 8, retention => '5 days') IS NOT NULL;
COMMIT;
RESET ROLE;
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'kept', :'pos_mid'));

-- forget => true drops everything; enabling again makes a new collection.
SET ROLE regress_keep_owner;
SELECT changefeed.disable('kept', forget => true);
RESET ROLE;
SELECT count(*) AS collections FROM changefeed.collection WHERE id = :first_id;
SELECT count(*) AS leases FROM changefeed.lease WHERE collection_id = :first_id;
SELECT count(*) AS processors FROM changefeed.processor WHERE collection_id = :first_id;
SELECT count(*) AS applied FROM changefeed.applied WHERE collection_id = :first_id;
SELECT try($$SELECT changefeed.disable('kept')$$);
SET ROLE regress_keep_owner;
SELECT changefeed.enable('kept') AS second_id \gset
SELECT :second_id <> :first_id AS new_id;

-- Dropping a table disabled with its state kept drops that state.
SET ROLE regress_keep_proc;
SELECT changefeed.lease_init('kept', 'proj');
SET ROLE regress_keep_owner;
SELECT changefeed.disable('kept');
RESET ROLE;
SELECT count(*) AS leases FROM changefeed.lease WHERE collection_id = :second_id;
DROP TABLE kept;
SELECT count(*) AS collections FROM changefeed.collection WHERE id = :second_id;
SELECT count(*) AS leases FROM changefeed.lease WHERE collection_id = :second_id;
SELECT count(*) AS orphans FROM changefeed.collection c WHERE NOT EXISTS (SELECT 1 FROM pg_class WHERE oid = c.relid);

DROP OWNED BY regress_keep_owner, regress_keep_proc, regress_keep_other;
DROP ROLE regress_keep_owner, regress_keep_proc, regress_keep_other;
