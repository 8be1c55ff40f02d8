-- Torture test schema: two enabled tables (one partitioned), the truth of what committed, and
-- what the consumers were delivered.
\set ON_ERROR_STOP on
CREATE EXTENSION changefeed;
CREATE SCHEMA torture;
CREATE SEQUENCE torture.vid_seq;     -- version ids: unique over both tables
CREATE SEQUENCE torture.id_seq_0;    -- keys of docs, never reused
CREATE SEQUENCE torture.id_seq_1;    -- keys of docs2

-- vid: this version's id; kver: the key's version number (1, 2, ...), bumped
-- under the row lock, so it is the key's commit order.
CREATE TABLE public.docs  (id bigint PRIMARY KEY, vid bigint NOT NULL, kver int NOT NULL, body jsonb NOT NULL);
-- docs2 is partitioned, and one partition has another column order: capture
-- maps columns by name in each partition.
CREATE TABLE public.docs2 (id bigint PRIMARY KEY, vid bigint NOT NULL, kver int NOT NULL, body jsonb NOT NULL)
    PARTITION BY HASH (id);
CREATE TABLE public.docs2_p0 PARTITION OF public.docs2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE public.docs2_p1 (body jsonb NOT NULL, kver int NOT NULL, vid bigint NOT NULL, id bigint NOT NULL);
ALTER TABLE public.docs2 ATTACH PARTITION public.docs2_p1 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
-- docs_ranges: run.sh --ranges (default 16, the extension's default).
SELECT changefeed.enable('public.docs', ranges => :docs_ranges);
SELECT changefeed.enable('public.docs2', ranges => 4);
-- Written by sessions of other TimeZones and DateStyles (shape_and_zones.sh):
-- a timestamptz key, as time-partitioned tables have.
CREATE SEQUENCE torture.zone_seq;
CREATE TABLE public.zoned (at timestamptz, n bigint, zone text NOT NULL, PRIMARY KEY (at, n));
SELECT changefeed.enable('public.zoned', ranges => 4);

-- Written by the writers in the writing transaction.  op: i insert, u update,
-- p patch, d delete (vid is then the delete's own id, prev_vid the removed one);
-- body_md5 is md5(body::text) of the version written (null for a delete).
-- No indexes: the writers pay for every one, the checker hashes.
CREATE TABLE torture.truth (tbl smallint NOT NULL, id bigint NOT NULL, vid bigint NOT NULL, kver int NOT NULL,
                            op "char" NOT NULL, prev_vid bigint, body_md5 text);
-- The clear rows a TRUNCATE of docs2 logged (one per range).
CREATE TABLE torture.truth_clear (tbl smallint NOT NULL, seq bigint NOT NULL, range_id int NOT NULL);

-- Written by the all-versions handlers before they return.  did orders the
-- deliveries; inst names one consumer process (instance#pid); op is the log's
-- (c create, r replace, d delete, t clear); for a delete kver is the removed
-- version's + 1; for a replace or a delete prev_vid and prev_md5 are the vid
-- and md5(body::text) of the image from before that the change carried.
CREATE TABLE torture.deliveries (did bigserial, tbl smallint NOT NULL, inst text NOT NULL, range_id int NOT NULL,
                                 seq bigint NOT NULL, op "char" NOT NULL, id bigint, vid bigint, kver int,
                                 prev_vid bigint, epoch bigint NOT NULL, prev_md5 text);
-- Maintained by the latest-version processor.
CREATE TABLE torture.projection (tbl smallint, id bigint, vid bigint NOT NULL, kver int NOT NULL,
                                 PRIMARY KEY (tbl, id));
-- Where the deliberately broken consumer got to.
CREATE TABLE torture.broken_checkpoint (tbl smallint, slot int, last_seq bigint NOT NULL, PRIMARY KEY (tbl, slot));
-- Maintained by the exactly-once consumer (transactional handler, all-versions
-- feed): the projection, and how often each event was applied (n > 1 would be
-- a change applied twice), written in the transaction that stores the checkpoint.
CREATE TABLE torture.exact_projection (tbl smallint, id bigint, vid bigint NOT NULL, kver int NOT NULL,
                                       PRIMARY KEY (tbl, id));
CREATE TABLE torture.exact_applied (event_id text PRIMARY KEY, tbl smallint NOT NULL, seq bigint NOT NULL,
                                    n int NOT NULL DEFAULT 1);
-- A consumer bound by row-level security (torture_consumer rls): its role may
-- see the even keys of both tables, as their policies say, and its processor
-- must deliver exactly those keys' changes (and every clear), nothing of an odd key.
CREATE ROLE torture_rls LOGIN IN ROLE changefeed_processor;
GRANT SELECT ON public.docs, public.docs2 TO torture_rls;
ALTER TABLE public.docs ENABLE ROW LEVEL SECURITY;
ALTER TABLE public.docs2 ENABLE ROW LEVEL SECURITY;
CREATE POLICY even_keys ON public.docs FOR SELECT TO torture_rls USING (id % 2 = 0);
CREATE POLICY even_keys ON public.docs2 FOR SELECT TO torture_rls USING (id % 2 = 0);
CREATE TABLE torture.rls_deliveries (LIKE torture.deliveries INCLUDING DEFAULTS);
-- What the consumer bound by row-level security owes and has not delivered:
-- every change of an even key, every clear.
CREATE VIEW torture.rls_missing AS
SELECT t.tbl, t.id, t.vid, t.op, NULL::bigint AS seq FROM torture.truth t
 WHERE t.id % 2 = 0 AND t.op <> 'd'
   AND NOT EXISTS (SELECT 1 FROM torture.rls_deliveries d WHERE d.tbl = t.tbl AND d.vid = t.vid)
UNION ALL
SELECT t.tbl, t.id, t.vid, t.op, NULL FROM torture.truth t
 WHERE t.id % 2 = 0 AND t.op = 'd'
   AND NOT EXISTS (SELECT 1 FROM torture.rls_deliveries d WHERE d.tbl = t.tbl AND d.op = 'd' AND d.prev_vid = t.prev_vid)
UNION ALL
SELECT c.tbl, NULL, NULL, 't', c.seq FROM torture.truth_clear c
 WHERE NOT EXISTS (SELECT 1 FROM torture.rls_deliveries d WHERE d.tbl = c.tbl AND d.op = 't' AND d.seq = c.seq);
