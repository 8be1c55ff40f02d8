-- The deduplication store of projector processors (changefeed.applied): the
-- processor's owner records and asks which event ids were applied, another
-- processor role is refused, drop_processor() forgets them, maintain() prunes
-- them with the collection's retention; read() names each change's event id.
\set SHOW_CONTEXT never
CREATE ROLE regress_dd_owner LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_dd_proc1 LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_dd_proc2 LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_dd_admin LOGIN IN ROLE changefeed_admin;
GRANT CREATE ON SCHEMA public TO regress_dd_owner;
SET ROLE regress_dd_owner;
CREATE TABLE dd_short (id int PRIMARY KEY, v int);
CREATE TABLE dd_long (id int PRIMARY KEY, v int);
SELECT changefeed.enable('dd_short', ranges => 1, retention => '1 hour') IS NOT NULL AS enabled;
SELECT changefeed.enable('dd_long', ranges => 1) IS NOT NULL AS enabled;
GRANT SELECT ON dd_short, dd_long TO regress_dd_proc1, regress_dd_proc2;
RESET ROLE;

-- read() gives every change "<collection id>.<txid>.<seq>", the same on every read.
CREATE TEMP TABLE dd_start AS SELECT changefeed.current_position() AS pos;
GRANT SELECT ON dd_start TO PUBLIC;
SET ROLE regress_dd_owner;
INSERT INTO dd_short VALUES (1, 1), (2, 2);
UPDATE dd_short SET v = 3 WHERE id = 1;
RESET ROLE;
SET ROLE regress_dd_proc1;
SELECT r.doc_id, r.event_id = c.id || '.' || r.txid || '.' || r.seq AS shaped
  FROM changefeed.read('dd_short', (SELECT pos FROM dd_start)) r
  JOIN changefeed.collections c ON c.table_name = 'dd_short'::regclass
 ORDER BY r.seq;
SELECT count(DISTINCT event_id) AS distinct_ids,
       (SELECT array_agg(event_id ORDER BY seq) FROM changefeed.read('dd_short', (SELECT pos FROM dd_start)))
     = (SELECT array_agg(event_id ORDER BY seq) FROM changefeed.read('dd_short', (SELECT pos FROM dd_start)))
       AS stable
  FROM changefeed.read('dd_short', (SELECT pos FROM dd_start));

-- The processor's owner records and sees its ids.
SELECT changefeed.lease_init('dd_short', 'projector');
SELECT changefeed.lease_init('dd_long', 'projector');
SELECT changefeed.dedup_record('dd_short', 'projector', ARRAY['1.10.1', '1.10.2']) AS recorded;
SELECT changefeed.dedup_record('dd_short', 'projector', ARRAY['1.10.2', '1.10.3']) AS recorded_again;
SELECT changefeed.dedup_applied('dd_short', 'projector', ARRAY['1.10.1', '1.10.3', '1.10.4', '1.10.1']) AS applied
 ORDER BY 1;
SELECT changefeed.dedup_record('dd_long', 'projector', ARRAY['2.10.1']) AS recorded;
SELECT changefeed.dedup_record('dd_short', 'projector', '{}') AS nothing;
SELECT try($$SELECT changefeed.dedup_record('dd_short', 'projector', NULL)$$);
SELECT try($$SELECT changefeed.dedup_record('dd_short', 'projector', ARRAY['x', NULL])$$);
SELECT try($$SELECT * FROM changefeed.dedup_applied('dd_short', '', ARRAY['x'])$$);
-- Another role is refused the processor's store, and the table itself is closed.
SET ROLE regress_dd_proc2;
SELECT try($$SELECT changefeed.dedup_record('dd_short', 'projector', ARRAY['1.10.9'])$$);
SELECT try($$SELECT * FROM changefeed.dedup_applied('dd_short', 'projector', ARRAY['1.10.1'])$$);
SELECT try($$SELECT count(*) FROM changefeed.applied$$);
RESET ROLE;
SELECT processor, count(*) FROM changefeed.applied GROUP BY processor;

-- Pruned with each collection's retention: nothing within the hour, then
-- the short collection's ids; the long one's stay.
SET ROLE regress_dd_admin;
SELECT failed_steps FROM changefeed.maintain(now() + interval '30 minutes');
RESET ROLE;
SELECT c.relid::regclass AS tbl, count(*)
  FROM changefeed.applied a JOIN changefeed.collection c ON c.id = a.collection_id
 GROUP BY 1 ORDER BY 1;
SET ROLE regress_dd_admin;
SELECT failed_steps FROM changefeed.maintain(now() + interval '2 hours');
RESET ROLE;
SELECT c.relid::regclass AS tbl, count(*)
  FROM changefeed.applied a JOIN changefeed.collection c ON c.id = a.collection_id
 GROUP BY 1 ORDER BY 1;

-- drop_processor() forgets them with the leases.
SET ROLE regress_dd_proc1;
SELECT changefeed.drop_processor('dd_long', 'projector');
RESET ROLE;
SELECT count(*) AS left_over FROM changefeed.applied;

SET ROLE regress_dd_owner;
SELECT changefeed.disable('dd_short');
SELECT changefeed.disable('dd_long');
DROP TABLE dd_short, dd_long;
RESET ROLE;
DROP TABLE dd_start;
REVOKE CREATE ON SCHEMA public FROM regress_dd_owner;
DROP ROLE regress_dd_owner, regress_dd_proc1, regress_dd_proc2, regress_dd_admin;
