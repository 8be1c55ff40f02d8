-- changefeed: the position key (extension/position/position_key.cpp).
--
-- Positions carry a MAC under this database's 32-byte key.  It is a row of
-- the database, so WAL carries it to every standby and base backup: a hot
-- standby and a promoted one accept the primary's positions, and nothing
-- makes a key during recovery (only this script does, which a standby cannot
-- run).  No role is granted anything on the table (superusers and the
-- extension's owner can read it); the C reader scans it directly, whoever
-- calls.  Not dumped: a restored dump is another database, whose old
-- positions fail with CF005 whatever the key, and a dump must not carry the
-- secret.  The key is never rotated: a new one would fail every stored
-- position with CF004.
CREATE OR REPLACE FUNCTION changefeed._new_position_key() RETURNS bytea
AS 'MODULE_PATHNAME', 'changefeed_new_position_key' LANGUAGE c VOLATILE STRICT;
REVOKE ALL ON FUNCTION changefeed._new_position_key() FROM PUBLIC;
CREATE TABLE changefeed.position_key (
    key     bytea NOT NULL CHECK (length(key) = 32),
    one_row bool NOT NULL DEFAULT true PRIMARY KEY CHECK (one_row)
);
REVOKE ALL ON changefeed.position_key FROM PUBLIC;
INSERT INTO changefeed.position_key (key) VALUES (changefeed._new_position_key());
