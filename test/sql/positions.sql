-- Positions are opaque, versioned, authenticated and validated: never a
-- silent restart, never one minted by hand.
\set SHOW_CONTEXT never
CREATE TABLE pos_t (id int PRIMARY KEY);
SELECT changefeed.enable('pos_t') IS NOT NULL;
SELECT left(changefeed.current_position(), 4) AS prefix;
-- The lower snapshot of a fresh position is the statement's snapshot.
SELECT (changefeed.position_decode(changefeed.current_position())).lo::text = pg_current_snapshot()::text AS same_snapshot;
SELECT (changefeed.position_decode(changefeed.current_position())).hi IS NULL AS no_window;
-- A position inside a window round-trips whole.
SELECT lo::text, hi::text, last_seq
  FROM changefeed.position_decode(changefeed.position_encode('10:20:12,15', '20:30:25', 7));
-- A position that read() returned round-trips and reads on.
INSERT INTO pos_t VALUES (1), (2);
SELECT "position" AS read_pos FROM changefeed.read('pos_t', changefeed.position_encode('1:1:', NULL, 0), max_changes => 1) \gset
SELECT hi IS NOT NULL AS in_window, last_seq > 0 AS has_seq FROM changefeed.position_decode(:'read_pos');
SELECT count(*) AS rest FROM changefeed.read('pos_t', :'read_pos');

-- Malformed, truncated, damaged, unknown version, null.
SELECT try($$SELECT * FROM changefeed.read('pos_t', 'not a position')$$);
SELECT try($$SELECT * FROM changefeed.read('pos_t', '')$$);
SELECT try($$SELECT * FROM changefeed.read('pos_t', 'cf2.@@@@')$$);
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t', left(p, n)))
  FROM changefeed.position_encode('10:20:12,15', '20:30:25', 7) p, (VALUES (32), (-4), (-24)) AS cut(n);
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t', 'cf9.' || substr(changefeed.current_position(), 5)));
SELECT try($$SELECT * FROM changefeed.read('pos_t', NULL)$$);

-- Helpers that take positions apart and build them again, as a forger would.
CREATE FUNCTION b64url_decode(t text) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT decode(translate(t, '-_', '+/') || repeat('=', (4 - length(t) % 4) % 4), 'base64')
$$;
CREATE FUNCTION b64url_encode(b bytea) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT rtrim(translate(replace(encode(b, 'base64'), E'\n', ''), '+/', '-_'), '=')
$$;
CREATE FUNCTION le(v bigint, n int) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    out bytea := decode(repeat('00', n), 'hex');
BEGIN
    FOR i IN 0 .. n - 1 LOOP
        out := set_byte(out, i, ((v >> (8 * i)) & 255)::int);
    END LOOP;
    RETURN out;
END
$$;
CREATE FUNCTION snapshot_bytes(s pg_snapshot) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT le(pg_snapshot_xmin(s)::text::bigint, 8) || le(pg_snapshot_xmax(s)::text::bigint, 8)
        || le((SELECT count(*) FROM pg_snapshot_xip(s)), 4)
        || coalesce((SELECT string_agg(le(x::text::bigint, 8), ''::bytea ORDER BY x::text::bigint)
                       FROM pg_snapshot_xip(s) x), ''::bytea)
$$;
-- The bytes a tag covers: version, cluster, database, history (version 3:
-- timeline, WAL position; by default this server's now), snapshots, last seq.
CREATE FUNCTION position_body(version int, lo pg_snapshot, hi pg_snapshot, last_seq bigint,
                              db oid DEFAULT NULL, sysid bigint DEFAULT NULL,
                              tli bigint DEFAULT NULL, lsn pg_lsn DEFAULT NULL) RETURNS bytea
LANGUAGE sql STABLE AS $$
    SELECT le(version, 1)
        || le(coalesce(sysid, (SELECT system_identifier FROM pg_control_system())), 8)
        || le(coalesce(db, (SELECT oid FROM pg_database WHERE datname = current_database()))::bigint, 4)
        || CASE WHEN version >= 3
                THEN le(coalesce(tli, (SELECT timeline_id FROM pg_control_checkpoint())), 4)
                  || le((coalesce(lsn, pg_current_wal_insert_lsn()) - '0/0'::pg_lsn)::bigint, 8)
                ELSE ''::bytea END
        || snapshot_bytes(lo) || le(CASE WHEN hi IS NULL THEN 0 ELSE 1 END, 1)
        || coalesce(snapshot_bytes(hi), ''::bytea) || le(last_seq, 8)
$$;
-- The version, timeline and WAL position a position holds.
CREATE FUNCTION position_history(pos text, OUT version int, OUT tli bigint, OUT lsn pg_lsn) LANGUAGE sql IMMUTABLE AS $$
    SELECT get_byte(b, 0),
           CASE WHEN get_byte(b, 0) >= 3 THEN (SELECT sum(get_byte(b, 13 + i)::bigint << (8 * i)) FROM generate_series(0, 3) i) END,
           CASE WHEN get_byte(b, 0) >= 3
                THEN ('0/0'::pg_lsn + (SELECT sum(get_byte(b, 17 + i)::numeric * (256::numeric ^ i)) FROM generate_series(0, 7) i)) END
      FROM b64url_decode(substr(pos, 5)) b
$$;
CREATE FUNCTION fnv1a32(b bytea) RETURNS bigint LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    h bigint := 2166136261;
BEGIN
    FOR i IN 0 .. length(b) - 1 LOOP
        h := ((h # get_byte(b, i)) * 16777619) & 4294967295;
    END LOOP;
    RETURN h;
END
$$;
-- HMAC-SHA256 (RFC 2104) on the server's own sha256().
CREATE FUNCTION hmac_sha256(key bytea, msg bytea) RETURNS bytea LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    k bytea := key || decode(repeat('00', 64 - length(key)), 'hex');
    ipad bytea := k;
    opad bytea := k;
BEGIN
    FOR i IN 0 .. 63 LOOP
        ipad := set_byte(ipad, i, get_byte(k, i) # 54);
        opad := set_byte(opad, i, get_byte(k, i) # 92);
    END LOOP;
    RETURN sha256(opad || sha256(ipad || msg));
END
$$;
CREATE FUNCTION cf2(body bytea, tag bytea) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'cf2.' || b64url_encode(body || tag)
$$;

-- The tag is HMAC-SHA256 under the database's key, truncated to 16 bytes:
-- recomputed here on the server's sha256() (superusers can read the key's
-- table), it matches what the codec wrote.
SELECT length((SELECT key FROM changefeed.position_key)) AS key_bytes;
SELECT substring(b FROM length(b) - 15)
       = substring(hmac_sha256((SELECT key FROM changefeed.position_key),
                               substring(b FOR length(b) - 16)) FOR 16) AS tag_is_hmac_sha256
  FROM b64url_decode(substr(changefeed.current_position(), 5)) b;
SELECT cf2(position_body(3, '10:20:12,15', '20:30:25', 7, tli => h.tli, lsn => h.lsn),
           substring(hmac_sha256((SELECT key FROM changefeed.position_key),
                                 position_body(3, '10:20:12,15', '20:30:25', 7, tli => h.tli, lsn => h.lsn)) FOR 16))
       = p AS same_text
  FROM changefeed.position_encode('10:20:12,15', '20:30:25', 7) p, position_history(p) h;
-- A role that is not a superuser cannot read the key, not even an admin of
-- the extension; it still gets positions.
CREATE ROLE regress_cf_position_reader IN ROLE changefeed_admin;
SET ROLE regress_cf_position_reader;
SELECT try($$SELECT key FROM changefeed.position_key$$);
SELECT left(changefeed.current_position(), 4) AS prefix_as_admin;
RESET ROLE;
DROP ROLE regress_cf_position_reader;

-- Forged: a position replaying all history (lo = 1:1), with the unkeyed
-- checksum positions used to carry, with an unkeyed hash, under a wrong key.
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t',
       cf2(body, le(fnv1a32(body), 4) || decode(repeat('00', 12), 'hex'))))
  FROM position_body(2, '1:1:', NULL, 0) body;
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t', cf2(body, substring(sha256(body) FOR 16))))
  FROM position_body(2, '1:1:', NULL, 0) body;
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t',
       cf2(body, substring(hmac_sha256(decode(repeat('00', 32), 'hex'), body) FOR 16))))
  FROM position_body(2, '1:1:', NULL, 0) body;
-- A valid position with lo moved back to 1:1 and its tag kept.
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t',
       cf2(position_body(2, '1:1:', NULL, 0), substring(b FROM length(b) - 15))))
  FROM b64url_decode(substr(changefeed.current_position(), 5)) b;
-- One byte flipped, in each part of a position: cluster and database are
-- foreign (CF005), the rest forged or damaged (CF004).
SELECT i, try(format('SELECT * FROM changefeed.position_decode(%L)',
              cf2(substring(flipped FOR length(flipped) - 16), substring(flipped FROM length(flipped) - 15))))
  FROM b64url_decode(substr(changefeed.position_encode('10:20:12,15', '20:30:25', 7), 5)) b,
       LATERAL (VALUES (0), (1), (9), (13), (17), (25), (33), (41), (45), (61), (65), (73), (81), (85), (93), (101), (113)) AS v(i),
       LATERAL (SELECT set_byte(b, i, get_byte(b, i) # 1) AS flipped) f
 ORDER BY i;
-- One character of the text flipped (in the tag), and the last one with its
-- unused low bit set: neither names the position.
SELECT try(format('SELECT * FROM changefeed.position_decode(%L)',
       overlay(p placing (CASE WHEN substr(p, length(p) - 5, 1) = 'A' THEN 'B' ELSE 'A' END) from length(p) - 5 for 1)))
  FROM changefeed.position_encode('10:20:12,15', NULL, 0) p;
SELECT length(b64url_decode(substr(p, 5))) % 3 AS trailing_bytes,
       try(format('SELECT * FROM changefeed.position_decode(%L)',
           overlay(p placing substr(a, ((strpos(a, right(p, 1)) - 1) # 1) + 1, 1) from length(p) for 1)))
  FROM changefeed.position_encode('10:20:12,15', NULL, 0) p,
       (VALUES ('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_')) AS alphabet(a);

-- Too long: refused by its length before anything is decoded (1 MiB is the
-- cap on a server with default settings); 1 MiB itself is decoded.
SELECT try($$SELECT changefeed.position_decode('cf2.' || repeat('A', 44 * 1024 * 1024))$$);
SELECT try($$SELECT * FROM changefeed.read('pos_t', 'cf2.' || repeat('A', 44 * 1024 * 1024))$$);
SELECT try($$SELECT changefeed.position_decode('cf2.' || repeat('A', 1024 * 1024 - 3))$$);
SELECT try($$SELECT changefeed.position_decode('cf2.' || repeat('A', 1024 * 1024 - 4))$$);

-- From the future (restored from an older backup?): authentic, minted with
-- the key, but a snapshot's xmax lies past the next transaction id.  The
-- same minting of a present snapshot is accepted.
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t',
       cf2(body, substring(hmac_sha256((SELECT key FROM changefeed.position_key), body) FOR 16))))
  FROM pg_snapshot_xmax(pg_current_snapshot()) x,
       position_body(2, format('%s:%s:', x, x)::pg_snapshot, NULL, 0) body;
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t',
       cf2(body, substring(hmac_sha256((SELECT key FROM changefeed.position_key), body) FOR 16))))
  FROM pg_snapshot_xmax(pg_current_snapshot()) x,
       position_body(2, format('%s:%s:', x::text::bigint + 1000, x::text::bigint + 1000)::pg_snapshot, NULL, 0) body;
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t',
       cf2(body, substring(hmac_sha256((SELECT key FROM changefeed.position_key), body) FOR 16))))
  FROM pg_snapshot_xmax(pg_current_snapshot()) x,
       position_body(2, format('%s:%s:', x, x)::pg_snapshot,
                     format('%s:%s:', x, x::text::bigint + 1000)::pg_snapshot, 1) body;

-- History: a position holds the timeline and WAL position it was taken at;
-- positions of version 2 (above) have none and are read without the check.
SELECT h.version, h.tli = (SELECT timeline_id FROM pg_control_checkpoint()) AS this_timeline,
       h.lsn <= pg_current_wal_insert_lsn() AS not_ahead
  FROM position_history(changefeed.current_position()) h;
CREATE FUNCTION minted(body bytea) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT cf2(body, substring(hmac_sha256((SELECT key FROM changefeed.position_key), body) FOR 16))
$$;
-- Minted with the key at a point of this server's history: accepted.
SELECT try(format('SELECT count(*) FROM changefeed.read(%L, %L)', 'pos_t',
       minted(position_body(3, pg_current_snapshot(), NULL, 0, lsn => '0/100'))));
-- On a timeline this server never was on (a point-in-time restore's abandoned
-- branch, a standby promoted elsewhere): CF017, also when the rest is valid.
SELECT try(format('SELECT count(*) FROM changefeed.read(%L, %L)', 'pos_t',
       minted(position_body(3, pg_current_snapshot(), NULL, 0, tli => timeline_id + 1, lsn => '0/100'))))
  FROM pg_control_checkpoint();
SELECT try(format('SELECT * FROM changefeed.position_decode(%L)',
       minted(position_body(3, '10:20:12,15', '20:30:25', 7, tli => 7))));
-- Ahead of this server's WAL on its own timeline: a primary reads it (the WAL
-- position is where inserting had got to, and a crash loses what was not
-- flushed); its transactions are checked against the next transaction id.
SELECT try(format('SELECT count(*) FROM changefeed.read(%L, %L)', 'pos_t',
       minted(position_body(3, pg_current_snapshot(), NULL, 0, lsn => pg_current_wal_insert_lsn() + 1000000000))));
SELECT try(format('SELECT count(*) FROM changefeed.read(%L, %L)', 'pos_t',
       minted(position_body(3, format('%s:%s:', x::text::bigint + 1000, x::text::bigint + 1000)::pg_snapshot, NULL, 0,
                            lsn => pg_current_wal_insert_lsn() + 1000000000))))
  FROM pg_snapshot_xmax(pg_current_snapshot()) x;
-- Timeline 0 exists only in version 2 positions.
SELECT try(format('SELECT count(*) FROM changefeed.read(%L, %L)', 'pos_t',
       minted(position_body(3, pg_current_snapshot(), NULL, 0, tli => 0))));
-- The full message of CF017 with its detail and hint.
\set VERBOSITY default
SELECT * FROM changefeed.position_decode(minted(position_body(3, '10:20:12,15', NULL, 0, tli => 7, lsn => '0/3000000')));

-- A cf1 position, issued before positions were authenticated: here the one
-- that replayed all history when its checksum was recomputed by hand.
SELECT 'cf1.' || b64url_encode(body || le(fnv1a32(body), 4)) AS cf1_pos
  FROM position_body(1, '1:1:', NULL, 0) body \gset
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t', :'cf1_pos'));
SELECT * FROM changefeed.read('pos_t', :'cf1_pos');

-- Taken on another cluster: well formed, refused as foreign before its tag
-- is looked at.
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t', cf2(body, decode(repeat('00', 16), 'hex'))))
  FROM position_body(2, '1:1:', NULL, 0, sysid => 1234567890123456789) body;
-- Taken in another database of this cluster.
\set regress_db :DBNAME
CREATE DATABASE regress_cf_other_db;
\c regress_cf_other_db
CREATE EXTENSION changefeed;
SELECT changefeed.current_position() AS other_db_pos \gset
\c :regress_db
SELECT try(format('SELECT * FROM changefeed.read(%L, %L)', 'pos_t', :'other_db_pos'));
DROP DATABASE regress_cf_other_db;
-- The full message with its hint.
SELECT * FROM changefeed.read('pos_t', :'other_db_pos');
SELECT * FROM changefeed.read('pos_t', 'garbage');
