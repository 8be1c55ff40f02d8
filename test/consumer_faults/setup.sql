-- Consumer fault stage (test/consumer_faults/run.sh): besides the torture schema, what the
-- projector consumers record and the faults the script injected.
\set ON_ERROR_STOP on
-- One row per projector call (torture_consumer project): at is the server's clock, as for faults.
CREATE TABLE torture.project_calls (event_id text NOT NULL, tbl smallint NOT NULL, seq bigint NOT NULL,
                                    pid int NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
-- kind: kill (SIGKILL), stop (SIGSTOP), cont (SIGCONT after a stop); pid: the consumer process.
CREATE TABLE torture.faults (pid int NOT NULL, slot text NOT NULL, kind text NOT NULL,
                             at timestamptz NOT NULL DEFAULT clock_timestamp());
