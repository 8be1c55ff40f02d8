-- Catch-up progress: "deliveries undelivered projection_behind exact_behind", one line
-- (undelivered: by the all-versions consumers or by the consumer bound by row-level security).
SELECT (SELECT count(*) FROM torture.deliveries),
       (SELECT count(*) FROM torture.truth t
         WHERE t.op <> 'd' AND NOT EXISTS (SELECT 1 FROM torture.deliveries d WHERE d.tbl = t.tbl AND d.vid = t.vid))
     + (SELECT count(*) FROM torture.truth t
         WHERE t.op = 'd' AND NOT EXISTS (SELECT 1 FROM torture.deliveries d
                                           WHERE d.tbl = t.tbl AND d.op = 'd' AND d.prev_vid = t.prev_vid))
     + (SELECT count(*) FROM torture.truth_clear c
         WHERE NOT EXISTS (SELECT 1 FROM torture.deliveries d WHERE d.tbl = c.tbl AND d.op = 't' AND d.seq = c.seq))
     + (SELECT count(*) FROM torture.rls_missing),
       (SELECT count(*) FROM (SELECT 0 AS tbl, id, vid FROM public.docs UNION ALL SELECT 1, id, vid FROM public.docs2) l
          LEFT JOIN torture.projection p USING (tbl, id) WHERE p.vid IS DISTINCT FROM l.vid),
       ((SELECT count(*) FROM torture.truth) + (SELECT count(*) FROM torture.truth_clear)
        - (SELECT count(*) FROM torture.exact_applied));
