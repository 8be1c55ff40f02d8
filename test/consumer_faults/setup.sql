-- Consumer fault stage (test/consumer_faults/run.sh): besides the torture schema, what the
-- projector consumers record and the faults the script injected.
\set ON_ERROR_STOP on
-- One row per projector call (torture_consumer project): at is the server's clock, as for faults.
CREATE TABLE torture.project_calls (event_id text NOT NULL, tbl smallint NOT NULL, seq bigint NOT NULL,
                                    pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
-- kind: kill (SIGKILL), stop (SIGSTOP), cont (SIGCONT after a stop); pid: the consumer process.
CREATE TABLE torture.faults (pid int NOT NULL, slot text NOT NULL, kind text NOT NULL,
                             at timestamptz NOT NULL DEFAULT clock_timestamp());

-- Read-your-writes under the faults: a session writes a row (a negative key,
-- which the writers never pick), takes the position after its commit, waits
-- with changefeed.wait_for() until the transactional consumer has handled
-- it, and reads its row from that consumer's projection; again until a row
-- in torture.ryw_stop says the writers are done (or `seconds` have passed).  outcome: seen (the row was there), missing (wait_for
-- returned and it was not: the bug this looks for), timeout (not handled in
-- 120 s).  waited: how long wait_for took.
CREATE SEQUENCE torture.ryw_seq;
CREATE TABLE torture.ryw (id bigint NOT NULL, outcome text NOT NULL, waited interval NOT NULL);
CREATE TABLE torture.ryw_stop (at timestamptz NOT NULL DEFAULT now());
CREATE PROCEDURE torture.read_your_writes(seconds int) LANGUAGE plpgsql AS $$
DECLARE
    until timestamptz := clock_timestamp() + make_interval(secs => seconds);
    my_id bigint;
    my_vid bigint;
    pos text;
    started timestamptz;
    handled bool;
    seen_vid bigint;
BEGIN
    WHILE clock_timestamp() < until AND NOT EXISTS (SELECT 1 FROM torture.ryw_stop) LOOP
        my_id := -nextval('torture.ryw_seq');
        WITH i AS (INSERT INTO public.docs (id, vid, kver, body)
                   VALUES (my_id, nextval('torture.vid_seq'), 1, '{"ryw": true}')
                   RETURNING id, vid, kver, md5(body::text) AS body_md5)
        INSERT INTO torture.truth (tbl, id, vid, kver, op, body_md5)
        SELECT 0, id, vid, kver, 'i', body_md5 FROM i RETURNING vid INTO my_vid;
        COMMIT;
        pos := changefeed.current_position();
        started := clock_timestamp();
        handled := false;
        WHILE NOT handled AND clock_timestamp() < started + interval '120 seconds' LOOP
            BEGIN
                PERFORM changefeed.wait_for('public.docs', 'torture-exact', pos, '5 seconds');
                handled := true;
            EXCEPTION WHEN SQLSTATE 'CF023' THEN
                NULL;  -- the consumers are being killed: wait again
            END;
        END LOOP;
        SELECT vid INTO seen_vid FROM torture.exact_projection WHERE tbl = 0 AND id = my_id;
        INSERT INTO torture.ryw VALUES (my_id,
            CASE WHEN NOT handled THEN 'timeout' WHEN seen_vid = my_vid THEN 'seen' ELSE 'missing' END,
            clock_timestamp() - started);
        COMMIT;
    END LOOP;
END
$$;
