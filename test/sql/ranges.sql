-- Many ranges, many instances: balancing from the registered live instances,
-- reads of many ranges at diverged positions in one call, and checkpoints of
-- many ranges in one call.
\set SHOW_CONTEXT never
CREATE TABLE bal (id int PRIMARY KEY, v int);
SELECT changefeed.enable('bal', ranges => 64) IS NOT NULL AS enabled;
SELECT changefeed.lease_init('bal', 'proj');
CREATE VIEW split AS
SELECT owner, count(*) AS n, min(epoch) AS min_epoch, max(epoch) AS max_epoch
  FROM changefeed.lease WHERE processor = 'proj' GROUP BY owner ORDER BY owner;

-- Four instances started together register before they acquire: the first
-- one's step already sees all four and takes only its share.
SELECT changefeed.instance_register('bal', 'proj', i, 'token-' || i) FROM unnest('{a,b,c,d}'::text[]) i;
SELECT count(*) AS a FROM changefeed.lease_acquire('bal', 'proj', 'a', '1 minute');
SELECT count(*) AS b FROM changefeed.lease_acquire('bal', 'proj', 'b', '1 minute');
SELECT count(*) AS c FROM changefeed.lease_acquire('bal', 'proj', 'c', '1 minute');
SELECT count(*) AS d FROM changefeed.lease_acquire('bal', 'proj', 'd', '1 minute');
SELECT * FROM split;
-- A second step changes nothing.
SELECT count(*) AS a FROM changefeed.lease_acquire('bal', 'proj', 'a', '1 minute');
SELECT * FROM split;

-- A fifth joins: one step takes its whole share (64/5 rounded down) from the
-- four, a few from each, with new epochs.
SELECT changefeed.instance_register('bal', 'proj', 'e', 'token-e');
SELECT count(*) AS e FROM changefeed.lease_acquire('bal', 'proj', 'e', '1 minute');
SELECT * FROM split;
-- The former owner of a moved range is fenced.
SELECT range_id AS moved, epoch FROM changefeed.lease
 WHERE processor = 'proj' AND owner = 'e' ORDER BY range_id LIMIT 1 \gset
SELECT try(format($$SELECT changefeed.lease_checkpoint('bal', 'proj', %s, 'a', 1, changefeed.current_position())$$, :moved));
-- Nobody above its share gives more: steps of the others change nothing.
SELECT sum(n) AS steps FROM (SELECT count(*) AS n FROM unnest('{a,b,c,d}'::text[]) i,
       LATERAL changefeed.lease_acquire('bal', 'proj', i, '1 minute') GROUP BY i) s;
SELECT * FROM split;

-- One leaves (stop: releases and unregisters): the others take its leases
-- in their next step, up to 64/4 rounded up each.
SELECT changefeed.lease_release('bal', 'proj', 'b');
SELECT changefeed.instance_unregister('bal', 'proj', 'b', 'token-b');
SELECT sum(n) AS steps FROM (SELECT count(*) AS n FROM unnest('{a,c,d,e}'::text[]) i,
       LATERAL changefeed.lease_acquire('bal', 'proj', i, '1 minute') GROUP BY i) s;
SELECT * FROM split;

-- One dies: its session is gone (here: a pid no session has), but its leases
-- count until they expire.
UPDATE changefeed.instance SET backend_pid = 0 WHERE processor = 'proj' AND instance = 'd';
SELECT instance, live FROM changefeed.instances('bal', 'proj');
SELECT count(*) AS a FROM changefeed.lease_acquire('bal', 'proj', 'a', '1 minute');
SELECT * FROM split;
UPDATE changefeed.holder SET expires_at = now() - interval '1 second' WHERE processor = 'proj' AND instance = 'd';
SELECT sum(n) AS steps FROM (SELECT count(*) AS n FROM unnest('{a,c,e}'::text[]) i,
       LATERAL changefeed.lease_acquire('bal', 'proj', i, '1 minute') GROUP BY i) s;
SELECT * FROM split;

-- An instance whose registration is gone but which still renews counts as
-- live: a newcomer's share leaves it its part.
SELECT changefeed.instance_unregister('bal', 'proj', 'c', 'token-c');
SELECT changefeed.instance_register('bal', 'proj', 'f', 'token-f');
SELECT count(*) AS f FROM changefeed.lease_acquire('bal', 'proj', 'f', '1 minute');
SELECT * FROM split;

-- lease_checkpoint_many: moves the ranges still held at their epochs and
-- returns the others (lost) without failing the call.
SELECT array_agg(range_id ORDER BY range_id) AS f_ranges, array_agg(epoch ORDER BY range_id) AS f_epochs
  FROM changefeed.lease WHERE processor = 'proj' AND owner = 'f' \gset
SELECT changefeed.current_position() AS pos_now \gset
SELECT array_agg(x) AS lost FROM changefeed.lease_checkpoint_many('bal', 'proj', 'f',
       (:'f_ranges'::int[])[1:2] || :moved, (:'f_epochs'::bigint[])[1:2] || 1::bigint,
       array_fill(:'pos_now'::text, ARRAY[3])) x;
SELECT count(*) FILTER (WHERE checkpoint = :'pos_now') AS moved_ckpt FROM changefeed.lease WHERE processor = 'proj';
SELECT try($$SELECT changefeed.lease_checkpoint_many('bal', 'proj', 'f', '{1,2}', '{1}', '{x,y}')$$);
SELECT try($$SELECT changefeed.lease_checkpoint_many('bal', 'proj', 'f', '{1,1}', '{1,1}', '{x,y}')$$);
SELECT try($$SELECT changefeed.lease_checkpoint_many('bal', 'proj', 'f', '{1,NULL}', '{1,1}', '{x,y}')$$);
SELECT try($$SELECT changefeed.lease_checkpoint_many('bal', 'proj', 'f', '{1}', '{1}', '{NULL}')$$);
SELECT try($$SELECT changefeed.lease_checkpoint_many('bal', 'proj', 'f', '{1}', '{1}', '{garbage}')$$);
SELECT try($$SELECT changefeed.lease_checkpoint_many('bal', 'proj', 'f', NULL, '{1}', '{garbage}')$$);
SELECT * FROM changefeed.lease_checkpoint_many('bal', 'proj', 'f', '{}', '{}', '{}');
SELECT changefeed.drop_processor('bal', 'proj');
DROP VIEW split;
SELECT changefeed.disable('bal');
DROP TABLE bal;

-- read_ranges(): ranges at diverged positions in one call.
CREATE TABLE rr (id text PRIMARY KEY, v int);
SELECT changefeed.enable('rr', ranges => 4) IS NOT NULL AS enabled;
-- Where each range resumes, as a consumer keeps it.
CREATE TABLE rr_pos (range_id int PRIMARY KEY, pos text NOT NULL);
CREATE TABLE rr_got (n serial, range_id int, doc_id text, v int, seq bigint);
INSERT INTO rr_pos SELECT r, changefeed.current_position() FROM generate_series(0, 3) r;
-- One call: hands the change rows to rr_got and stores the markers' positions.
CREATE FUNCTION rr_step(budget int) RETURNS TABLE (changes int, markers int, ranges_moved int)
LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    changes := 0; markers := 0; ranges_moved := 0;
    FOR r IN SELECT * FROM changefeed.read_ranges('rr', ARRAY(SELECT p.range_id FROM rr_pos p ORDER BY 1),
                                                  ARRAY(SELECT p.pos FROM rr_pos p ORDER BY p.range_id), budget) LOOP
        IF r.seq IS NOT NULL THEN
            INSERT INTO rr_got (range_id, doc_id, v, seq) VALUES (r.range_id, r.doc_id, (r.current->>'v')::int, r.seq);
            changes := changes + 1;
        ELSE
            UPDATE rr_pos p SET pos = r."position" WHERE p.range_id = ANY (r.resume_ranges);
            markers := markers + 1;
            ranges_moved := ranges_moved + cardinality(r.resume_ranges);
        END IF;
    END LOOP;
    RETURN NEXT;
END $$;
-- Any isolation level: the call reads in one snapshot, its statement's.
SELECT * FROM rr_step(10);
-- Ranges 0 and 1 stay behind while 2 and 3 move on: their positions diverge.
-- (Positions are counted by what they hold: two of one snapshot taken at
-- different WAL positions differ in text, and read alike.)
INSERT INTO rr SELECT 'doc-' || g, 1 FROM generate_series(1, 40) g;
UPDATE rr_pos SET pos = changefeed.current_position() WHERE range_id IN (2, 3);
UPDATE rr SET v = 2;
UPDATE rr SET v = 3 WHERE id LIKE 'doc-1%';
SELECT count(DISTINCT (d.lo::text, d.hi::text, d.last_seq)) AS positions FROM rr_pos, changefeed.position_decode(pos) d;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM rr_step(30);
COMMIT;
SELECT * FROM rr_step(1000);   -- READ COMMITTED, as a processor reads
-- Caught up: every range resumes at one position, and an idle call returns one marker.
SELECT count(DISTINCT (d.lo::text, d.hi::text, d.last_seq)) AS positions FROM rr_pos, changefeed.position_decode(pos) d;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM rr_step(1000);
COMMIT;
-- Gapless and in order: ranges 0 and 1 got every change of theirs (40
-- inserts, 40 updates, the 11 second updates), ranges 2 and 3 the updates
-- only, each exactly once and per document in version order.
SELECT range_id < 2 AS behind, count(*) AS got, count(DISTINCT seq) AS distinct_seqs
  FROM rr_got GROUP BY 1 ORDER BY 1;
SELECT (SELECT count(*) FROM changefeed.log l JOIN changefeed.collections c ON c.id = l.collection_id
         WHERE c.table_name = 'rr'::regclass
           AND (l.range_id < 2 OR l.op <> 'c')) = (SELECT count(*) FROM rr_got) AS complete;
SELECT count(*) AS out_of_order FROM (
    SELECT doc_id, v, lag(v) OVER (PARTITION BY doc_id ORDER BY n) AS prev,
           seq, lag(seq) OVER (PARTITION BY doc_id ORDER BY n) AS prev_seq FROM rr_got) s
 WHERE prev > v OR prev_seq > seq;
-- A budget that runs out leaves the last groups unread (no marker: they keep their positions).
UPDATE rr_pos SET pos = changefeed.current_position() WHERE range_id IN (2, 3);
UPDATE rr SET v = 4;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM rr_step(5);
COMMIT;
SELECT count(DISTINCT (d.lo::text, d.hi::text, d.last_seq)) AS positions FROM rr_pos, changefeed.position_decode(pos) d;
-- A common call is planned in C (read/ranges_plan.cpp); any tenant binding
-- sends it to the definition, read_ranges_plan().  Both read the same rows
-- and markers from these diverged positions, some inside a window.
CREATE FUNCTION rr_read(budget int) RETURNS TABLE (n bigint, line text) LANGUAGE sql AS $$
    SELECT row_number() OVER (), format('%s %s %s %s %s %s', r.seq, r.doc_id, r.resume_ranges, d.lo, d.hi, d.last_seq)
      FROM changefeed.read_ranges('rr', ARRAY(SELECT p.range_id FROM rr_pos p ORDER BY 1),
                                  ARRAY(SELECT p.pos FROM rr_pos p ORDER BY p.range_id), budget) r
      LEFT JOIN LATERAL changefeed.position_decode(r."position") d ON true
$$;
BEGIN ISOLATION LEVEL REPEATABLE READ;
CREATE TEMP TABLE planned_fast AS SELECT b, r.* FROM unnest('{3,7,1000}'::int[]) b, rr_read(b) r;
INSERT INTO changefeed.tenant_binding VALUES ('pg_monitor', 'nobody');
CREATE TEMP TABLE planned_by_definition AS SELECT b, r.* FROM unnest('{3,7,1000}'::int[]) b, rr_read(b) r;
SELECT (SELECT count(*) FROM planned_fast) AS rows,
       (SELECT count(*) FROM planned_fast WHERE line LIKE ' %') AS markers,
       NOT EXISTS (SELECT * FROM planned_fast EXCEPT SELECT * FROM planned_by_definition)
       AND NOT EXISTS (SELECT * FROM planned_by_definition EXCEPT SELECT * FROM planned_fast) AS agree;
ROLLBACK;
DROP FUNCTION rr_read(int);
-- Bad arguments.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT try($$SELECT * FROM changefeed.read_ranges('rr', '{0,1,2}', ARRAY[changefeed.current_position(), changefeed.current_position()])$$);
SELECT try($$SELECT * FROM changefeed.read_ranges('rr', '{0,0}', ARRAY[changefeed.current_position(), changefeed.current_position()])$$);
SELECT try($$SELECT * FROM changefeed.read_ranges('rr', '{4}', ARRAY[changefeed.current_position()])$$);
SELECT try($$SELECT * FROM changefeed.read_ranges('rr', '{0}', ARRAY[NULL::text])$$);
SELECT try($$SELECT * FROM changefeed.read_ranges('rr', '{0}', '{garbage}')$$);
SELECT try($$SELECT * FROM changefeed.read_ranges('rr', '{0}', ARRAY[changefeed.current_position()], 0)$$);
SELECT try($$SELECT * FROM changefeed.read_ranges('rr', '{0}', ARRAY[changefeed.current_position()], mode => 'some')$$);
SELECT count(*) AS nothing FROM changefeed.read_ranges('rr', '{}', '{}');
COMMIT;
-- One position for all the ranges (an idle consumer's call): each resumes from it.
SELECT seq IS NULL AS marker, resume_ranges FROM changefeed.read_ranges('rr', '{3,0,2}', ARRAY[changefeed.current_position()]);
-- positions_every: a change row carries its position where a batch of that
-- size ends (every third change of its range in the call), the others none;
-- each carried position resumes its range right after its row, and the
-- markers are those of a read without it.
CREATE TABLE rr_start AS SELECT changefeed.current_position() AS pos;
UPDATE rr SET v = 5;
CREATE TABLE rr_every AS
SELECT * FROM changefeed.read_ranges('rr', '{0,1,2,3}', ARRAY[(SELECT pos FROM rr_start)], 1000, positions_every => 3);
SELECT count(*) FILTER (WHERE seq IS NOT NULL) AS changes,
       count(*) FILTER (WHERE seq IS NOT NULL AND "position" IS NOT NULL) AS with_position,
       (SELECT sum(c / 3) FROM (SELECT count(*) c FROM rr_every WHERE seq IS NOT NULL GROUP BY range_id) x) AS thirds,
       count(*) FILTER (WHERE seq IS NULL AND "position" IS NOT NULL) AS markers
  FROM rr_every;
SELECT count(*) AS misplaced FROM (
    SELECT "position" IS NOT NULL AS has, row_number() OVER (PARTITION BY range_id ORDER BY seq) % 3 = 0 AS should
      FROM rr_every WHERE seq IS NOT NULL) x
 WHERE has <> should;
SELECT count(*) AS resumed_wrong FROM rr_every e
 WHERE e.seq IS NOT NULL AND e."position" IS NOT NULL
   AND (SELECT min(n.seq) FROM changefeed.read_ranges('rr', ARRAY[e.range_id], ARRAY[e."position"], 1000) n)
       IS DISTINCT FROM (SELECT min(f.seq) FROM rr_every f WHERE f.range_id = e.range_id AND f.seq > e.seq);
SELECT resume_ranges FROM rr_every WHERE seq IS NULL;
SELECT try($$SELECT * FROM changefeed.read_ranges('rr', '{0}', ARRAY[changefeed.current_position()], positions_every => 0)$$);
DROP TABLE rr_start, rr_every;
-- The entry point runs as its caller; the implementation is the extension's.
SELECT p.proname, p.prosecdef, has_function_privilege('changefeed_reader', p.oid, 'EXECUTE') AS reader
  FROM pg_proc p WHERE p.pronamespace = 'changefeed'::regnamespace
   AND p.proname IN ('read_ranges', '_read_ranges', 'lease_checkpoint_many', '_lease_checkpoint_many')
 ORDER BY 1;
DROP FUNCTION rr_step(int);
DROP TABLE rr_pos, rr_got;
SELECT changefeed.disable('rr');
DROP TABLE rr;
