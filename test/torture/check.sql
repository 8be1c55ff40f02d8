-- The checker.  Prints one line of counts; details of anything wrong go to
-- the tables torture.bad_* for a look afterwards.
\set ON_ERROR_STOP on
SET work_mem = '256MB';

-- Each delivery with the truth version it is (tvid), null when none.
CREATE TEMP TABLE dm AS
SELECT d.did, d.tbl, d.inst, d.range_id, d.seq, d.op, d.id, d.kver, d.epoch,
       CASE WHEN d.op = 't' THEN NULL ELSE coalesce(tv.vid, td.vid) END AS tvid,
       (d.op = 't' AND c.seq IS NOT NULL) AS clear_ok
  FROM torture.deliveries d
  LEFT JOIN torture.truth tv
         ON d.op IN ('c', 'r') AND tv.tbl = d.tbl AND tv.vid = d.vid AND tv.id = d.id AND tv.kver = d.kver
        AND tv.op = ANY (CASE d.op WHEN 'c' THEN '{i}'::"char"[] ELSE '{u,p}'::"char"[] END)
  LEFT JOIN torture.truth td
         ON d.op = 'd' AND td.op = 'd' AND td.tbl = d.tbl AND td.prev_vid = d.prev_vid AND td.id = d.id
        AND td.kver = d.kver
  LEFT JOIN torture.truth_clear c ON d.op = 't' AND c.tbl = d.tbl AND c.seq = d.seq AND c.range_id = d.range_id;
ANALYZE dm;

-- First delivery of each truth version.
CREATE TEMP TABLE firsts AS
SELECT tbl, tvid, min(did) AS first_did, count(*) AS n FROM dm WHERE tvid IS NOT NULL GROUP BY 1, 2;
ANALYZE firsts;

DROP TABLE IF EXISTS torture.bad_lost, torture.bad_phantom, torture.bad_misordered, torture.bad_stream,
    torture.bad_previous;
CREATE TABLE torture.bad_lost AS
SELECT t.tbl, t.id, t.vid, t.kver, t.op, NULL::bigint AS seq FROM torture.truth t
 WHERE NOT EXISTS (SELECT 1 FROM firsts f WHERE f.tbl = t.tbl AND f.tvid = t.vid)
UNION ALL
SELECT c.tbl, NULL, NULL, NULL, 't', c.seq FROM torture.truth_clear c
 WHERE NOT EXISTS (SELECT 1 FROM dm WHERE dm.op = 't' AND dm.tbl = c.tbl AND dm.seq = c.seq AND dm.clear_ok);
CREATE TABLE torture.bad_phantom AS
SELECT * FROM dm WHERE (op <> 't' AND tvid IS NULL) OR (op = 't' AND NOT clear_ok);
-- Misordered: a key's version first delivered before an earlier version of the key was.
CREATE TABLE torture.bad_misordered AS
SELECT * FROM (
    SELECT t.tbl, t.id, t.kver, f.first_did,
           lag(t.kver) OVER w AS prev_kver, lag(f.first_did) OVER w AS prev_first_did
      FROM torture.truth t JOIN firsts f ON f.tbl = t.tbl AND f.tvid = t.vid
    WINDOW w AS (PARTITION BY t.tbl, t.id ORDER BY t.kver)) v
 WHERE prev_first_did IS NOT NULL AND first_did < prev_first_did;
-- Within one consumer's hold of one lease (a stream), a key's versions come
-- one after another: going back is a re-read from the checkpoint (at least
-- once), jumping ahead past a version is a gap.
CREATE TABLE torture.bad_stream AS
SELECT * FROM (
    SELECT dm.*, lag(kver) OVER w AS prev_kver
      FROM dm WHERE op <> 't'
    WINDOW w AS (PARTITION BY inst, tbl, range_id, epoch, id ORDER BY did)) s
 WHERE prev_kver IS NOT NULL AND kver > prev_kver + 1;

-- A replace's or a delete's image from before, as delivered (whole, though
-- the log may hold it as a patch): the vid and body of the version it
-- replaced, by the all-versions consumers and the one bound by row-level security.
CREATE TABLE torture.bad_previous AS
SELECT d.*, p.vid AS want_vid, p.body_md5 AS want_md5
  FROM (SELECT 'all' AS consumer, did, tbl, id, kver, op, prev_vid, prev_md5 FROM torture.deliveries
        UNION ALL
        SELECT 'rls', did, tbl, id, kver, op, prev_vid, prev_md5 FROM torture.rls_deliveries) d
  LEFT JOIN torture.truth p ON p.tbl = d.tbl AND p.id = d.id AND p.kver = d.kver - 1 AND p.op <> 'd'
 WHERE d.op IN ('r', 'd')
   AND (p.vid IS NULL OR d.prev_vid IS DISTINCT FROM p.vid OR d.prev_md5 IS DISTINCT FROM p.body_md5);

\pset tuples_only on
\pset format unaligned
SELECT concat_ws(' ',
  'committed=' || (SELECT count(*) FROM torture.truth),
  'clears=' || (SELECT count(*) FROM torture.truth_clear),
  'deliveries=' || (SELECT count(*) FROM dm),
  'lost=' || (SELECT count(*) FROM torture.bad_lost),
  'phantom=' || (SELECT count(*) FROM torture.bad_phantom),
  'misordered=' || (SELECT count(*) FROM torture.bad_misordered),
  'stream_gaps=' || (SELECT count(*) FROM torture.bad_stream),
  'wrong_range=' || (SELECT count(*) FROM (SELECT DISTINCT dm.tbl, dm.id, dm.range_id FROM dm WHERE dm.op <> 't') x
                       JOIN changefeed.collections c
                         ON c.table_name = (CASE x.tbl WHEN 0 THEN 'public.docs' ELSE 'public.docs2' END)::regclass
                      WHERE x.range_id <> changefeed.range_of(x.id::text, c.ranges)),
  'wrong_previous=' || (SELECT count(*) FROM torture.bad_previous),
  -- Replaces whose image from before the log holds as a patch: the check above covered them.
  'previous_patches=' || (SELECT count(*) FROM changefeed.log WHERE op = 'r' AND previous ? ''),
  'duplicates=' || ((SELECT coalesce(sum(n - 1), 0) FROM firsts)
                    + (SELECT count(*) - count(DISTINCT (tbl, seq)) FROM dm WHERE op = 't' AND clear_ok)),
  'projection_mismatch=' || (
      (SELECT count(*) FROM (SELECT 0 AS tbl, id, vid FROM public.docs UNION ALL SELECT 1, id, vid FROM public.docs2) l
         LEFT JOIN torture.projection p USING (tbl, id) WHERE p.vid IS DISTINCT FROM l.vid)
    + (SELECT count(*) FROM torture.projection p
        WHERE NOT EXISTS (SELECT 1 FROM torture.truth t
                           WHERE t.tbl = p.tbl AND t.vid = p.vid AND t.id = p.id AND t.kver = p.kver AND t.op <> 'd'))),
  -- The consumer bound by row-level security: every change of an even key
  -- and every clear delivered, nothing of an odd key (an image its policy hides).
  'rls_lost=' || (SELECT count(*) FROM torture.rls_missing),
  'rls_leaked=' || (SELECT count(*) FROM torture.rls_deliveries WHERE op <> 't' AND (id IS NULL OR id % 2 <> 0)),
  -- The exactly-once consumer: every change applied once (the all-versions
  -- feed delivers each committed change: versions, deletes, one clear per range),
  -- none twice, and its projection equal to the tables.
  'exact_applied_twice=' || (SELECT count(*) FROM torture.exact_applied WHERE n > 1),
  'exact_unapplied=' || ((SELECT count(*) FROM torture.truth) + (SELECT count(*) FROM torture.truth_clear)
                         - (SELECT count(*) FROM torture.exact_applied)),
  'exact_projection_mismatch=' || (
      (SELECT count(*) FROM (SELECT 0 AS tbl, id, vid, kver FROM public.docs
                             UNION ALL SELECT 1, id, vid, kver FROM public.docs2) l
         FULL JOIN torture.exact_projection p USING (tbl, id)
        WHERE p.vid IS DISTINCT FROM l.vid OR p.kver IS DISTINCT FROM l.kver)));
