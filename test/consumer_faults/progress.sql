-- Consumer fault stage, catch-up: "exact_behind project_behind", one line.
SELECT (SELECT count(*) FROM torture.truth) + (SELECT count(*) FROM torture.truth_clear)
       - (SELECT count(*) FROM torture.exact_applied),
       (SELECT count(*) FROM torture.truth) + (SELECT count(*) FROM torture.truth_clear)
       - (SELECT count(DISTINCT event_id) FROM torture.project_calls);
