-- Consumer fault stage: one line of counts.
--   exact_*    the TransactionalHandler consumer (torture-exact): applied twice, missing, projection
--              not equal to the tables
--   ryw_*      the read-your-writes session: writes seen in the projection after wait_for(),
--              missing there (wait_for returned early), timed out; how long wait_for took
--   project_*  the Projector consumer (torture-project): missing changes, duplicate calls (calls of
--              an event id after its first), and of those the ones a process death explains (the
--              process of the first call was SIGKILLed between the two calls, within 10 s of the
--              first: while that batch was in flight), the ones a freeze past the lease explains
--              (that process was SIGSTOPped so, or the
--              second call's process was frozen just before it: it resumed a batch whose lease had
--              moved), the ones nothing explains, and those made by the process of the first call
--              itself (a re-application after a connection loss)
\set ON_ERROR_STOP on
WITH calls AS (
    SELECT event_id, pid, at, row_number() OVER (PARTITION BY event_id ORDER BY at, pid) AS n
      FROM torture.project_calls),
firsts AS (SELECT event_id, pid, at FROM calls WHERE n = 1),
dups AS (
    SELECT d.event_id, d.pid, d.at, f.pid AS first_pid, f.at AS first_at,
           EXISTS (SELECT 1 FROM torture.faults k WHERE k.kind = 'kill' AND k.pid = f.pid
                      AND k.at >= f.at AND k.at <= d.at AND k.at <= f.at + interval '10 seconds') AS after_kill,
           EXISTS (SELECT 1 FROM torture.faults s WHERE s.kind = 'stop' AND s.pid = f.pid
                      AND s.at >= f.at AND s.at <= d.at AND s.at <= f.at + interval '10 seconds')
        OR EXISTS (SELECT 1 FROM torture.faults s JOIN torture.faults c
                       ON c.pid = s.pid AND c.kind = 'cont' AND c.at >= s.at
                    WHERE s.kind = 'stop' AND s.pid = d.pid AND s.at <= d.at
                      AND d.at <= c.at + interval '10 seconds') AS after_freeze
      FROM calls d JOIN firsts f USING (event_id)
     WHERE d.n > 1)
SELECT concat_ws(' ',
  'exact_applied_twice=' || (SELECT count(*) FROM torture.exact_applied WHERE n > 1),
  'exact_missing=' || ((SELECT count(*) FROM torture.truth) + (SELECT count(*) FROM torture.truth_clear)
                       - (SELECT count(*) FROM torture.exact_applied)),
  'exact_projection_mismatch=' || (
      SELECT count(*) FROM (SELECT 0 AS tbl, id, vid, kver FROM public.docs
                            UNION ALL SELECT 1, id, vid, kver FROM public.docs2) l
        FULL JOIN torture.exact_projection p USING (tbl, id)
       WHERE p.vid IS DISTINCT FROM l.vid OR p.kver IS DISTINCT FROM l.kver),
  'project_missing=' || ((SELECT count(*) FROM torture.truth) + (SELECT count(*) FROM torture.truth_clear)
                         - (SELECT count(*) FROM firsts)),
  'project_duplicates=' || (SELECT count(*) FROM dups),
  'project_after_kill=' || (SELECT count(*) FROM dups WHERE after_kill),
  'project_after_freeze=' || (SELECT count(*) FROM dups WHERE after_freeze AND NOT after_kill),
  'project_unexplained=' || (SELECT count(*) FROM dups WHERE NOT after_kill AND NOT after_freeze),
  'project_same_process=' || (SELECT count(*) FROM dups WHERE pid = first_pid),
  'ryw_seen=' || (SELECT count(*) FROM torture.ryw WHERE outcome = 'seen'),
  'ryw_missing=' || (SELECT count(*) FROM torture.ryw WHERE outcome = 'missing'),
  'ryw_timeout=' || (SELECT count(*) FROM torture.ryw WHERE outcome = 'timeout'),
  'ryw_wait_p50_ms=' || (SELECT coalesce(round(extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY waited)) * 1000), 0)
                           FROM torture.ryw),
  'ryw_wait_max_ms=' || (SELECT coalesce(round(extract(epoch FROM max(waited)) * 1000), 0) FROM torture.ryw),
  'kills=' || (SELECT count(*) FROM torture.faults WHERE kind = 'kill'),
  'stops=' || (SELECT count(*) FROM torture.faults WHERE kind = 'stop'));
