-- The torture test's checks of migrations under load and of the zone
-- writers (shape_and_zones.sh), one line of key=value; :steps is the number
-- of migration steps done.  Failures: every count but migrations, zone_deletes
-- and unversioned (figures) must be 0.
WITH docs AS (SELECT c.id, c.ranges FROM changefeed.collections c WHERE c.table_name = 'public.docs'::regclass),
     dl AS (SELECT l.* FROM changefeed.log l, docs WHERE l.collection_id = docs.id),
     zl AS (SELECT l.* FROM changefeed.log l JOIN changefeed.collections c ON c.id = l.collection_id
             WHERE c.table_name = 'public.zoned'::regclass)
SELECT concat_ws(' ',
  'migrations=' || :steps,
  -- Every step a version, each in every range's feed as a schema change.
  'schema_versions_missing=' || (1 + :steps) - (SELECT count(*) FROM changefeed.schema_version s, docs
                                                 WHERE s.collection_id = docs.id),
  'schema_rows_missing=' || (SELECT ranges FROM docs) * :steps - (SELECT count(*) FROM dl WHERE op = 's'),
  -- In a range's seq order a row never carries a version older than one before it.
  'schema_misordered=' || (SELECT count(*) FROM (
        SELECT schema_version, max(schema_version) OVER (PARTITION BY range_id ORDER BY seq) AS seen
          FROM dl WHERE schema_version IS NOT NULL) x WHERE schema_version < seen),
  -- Rows whose version was not looked up (maintenance held the catalog): read as version 1.
  'unversioned=' || (SELECT count(*) FROM dl WHERE schema_version IS NULL),
  'zone_deletes=' || (SELECT count(*) FROM zl WHERE op = 'd'),
  -- A delete whose document id no create has: made under another TimeZone
  -- or DateStyle than the create, it would have another id.
  -- (Set operations: the log has tens of thousands of each, one per document.)
  'zone_id_mismatch=' || (SELECT count(*) FROM (SELECT doc_id, range_id FROM zl WHERE op = 'd'
                                                EXCEPT ALL
                                                SELECT doc_id, range_id FROM zl WHERE op = 'c') x),
  -- Creates without a delete are exactly the rows left.
  'zone_orphans=' || ((SELECT count(*) FROM (SELECT doc_id FROM zl WHERE op = 'c'
                                             EXCEPT ALL
                                             SELECT doc_id FROM zl WHERE op = 'd') x)
                      - (SELECT count(*) FROM public.zoned)));
