-- changefeed: schema versions of enabled tables and the schema changes in
-- the feed.
--
-- Every shape an enabled table takes is a version (changefeed.schema_version,
-- log/catalog.sql): its columns by attnum, with the name and type each had,
-- and its key.  enable() records the first; the DDL guard (guard/guard.sql)
-- records a new one at the end of every command that changed the columns,
-- their names or types, or the key, in the command's own transaction, so
-- every row captured after it (capture.cpp, schema_versions.cpp) is written
-- under the new version and every row before under the old one.  A new
-- version is also a change in the feed: one row of operation 's' per range,
-- in order with the data, which all-versions readers receive when they ask
-- for it (read_mode 'all_with_schema', read/read.sql).

-- The table's columns now, in attnum order (dropped ones left out).
CREATE OR REPLACE FUNCTION changefeed.columns_now(tbl oid) RETURNS jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(jsonb_agg(jsonb_build_object('attnum', a.attnum, 'name', a.attname,
                                                 'type', format_type(a.atttypid, a.atttypmod))
                              ORDER BY a.attnum), '[]')
      FROM pg_attribute a
     WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped
$$;

-- What changed from columns `was` (key `was_key`) to `now` (`now_key`), as
-- the schema change event carries it: columns added, dropped, renamed and
-- retyped, by attnum, and the key.
CREATE OR REPLACE FUNCTION changefeed.schema_change(was jsonb, now jsonb, was_key text[], now_key text[],
                                                    version int)
RETURNS jsonb LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    WITH o AS (SELECT (e->>'attnum')::int AS attnum, e->>'name' AS name, e->>'type' AS type, e
                 FROM jsonb_array_elements(was) e),
         n AS (SELECT (e->>'attnum')::int AS attnum, e->>'name' AS name, e->>'type' AS type, e
                 FROM jsonb_array_elements(now) e)
    SELECT jsonb_build_object(
        'version', version,
        'previous_version', version - 1,
        'columns', now,
        'key', to_jsonb(now_key),
        'previous_key', to_jsonb(was_key),
        'added', (SELECT coalesce(jsonb_agg(n.e ORDER BY n.attnum), '[]') FROM n
                   WHERE NOT EXISTS (SELECT 1 FROM o WHERE o.attnum = n.attnum)),
        'dropped', (SELECT coalesce(jsonb_agg(o.e ORDER BY o.attnum), '[]') FROM o
                     WHERE NOT EXISTS (SELECT 1 FROM n WHERE n.attnum = o.attnum)),
        'renamed', (SELECT coalesce(jsonb_agg(jsonb_build_object('attnum', n.attnum, 'from', o.name, 'to', n.name)
                                              ORDER BY n.attnum), '[]')
                      FROM n JOIN o USING (attnum) WHERE o.name <> n.name),
        'retyped', (SELECT coalesce(jsonb_agg(jsonb_build_object('attnum', n.attnum, 'name', n.name,
                                                                 'from', o.type, 'to', n.type)
                                              ORDER BY n.attnum), '[]')
                      FROM n JOIN o USING (attnum) WHERE o.type <> n.type))
$$;

-- Writes schema change `change` of collection `collection_id` into the log,
-- one row per range, and drops every backend's cached version of it.
CREATE OR REPLACE FUNCTION changefeed.log_schema_change(collection_id int, relid oid, ranges int, version int,
                                                        change jsonb) RETURNS void
    AS 'MODULE_PATHNAME', 'changefeed_log_schema_change' LANGUAGE C STRICT;

-- Records the shape of collection `c`'s table now as a new version when it
-- differs from the last one (the first version when there is none) and
-- writes the change into the feed.  Returns the version in force.
CREATE OR REPLACE FUNCTION changefeed.record_schema(c changefeed.collection) RETURNS int
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    now_columns jsonb := changefeed.columns_now(c.relid);
    last changefeed.schema_version;
    v int;
BEGIN
    SELECT * INTO last FROM changefeed.schema_version s
     WHERE s.collection_id = c.id ORDER BY s.version DESC LIMIT 1;
    IF FOUND AND last.columns = now_columns AND last.key = c.key_columns THEN
        IF c.schema_version <> last.version THEN
            UPDATE changefeed.collection SET schema_version = last.version WHERE id = c.id;
        END IF;
        RETURN last.version;
    END IF;
    v := coalesce(last.version, 0) + 1;
    INSERT INTO changefeed.schema_version (collection_id, version, columns, key)
    VALUES (c.id, v, now_columns, c.key_columns);
    UPDATE changefeed.collection SET schema_version = v WHERE id = c.id;
    IF last.version IS NOT NULL THEN
        PERFORM changefeed.log_schema_change(c.id, c.relid, c.ranges, v,
            changefeed.schema_change(last.columns, now_columns, last.key, c.key_columns, v));
        UPDATE changefeed.schema_version s SET since_seq = currval('changefeed.log_seq')
         WHERE s.collection_id = c.id AND s.version = v;
    END IF;
    RETURN v;
END
$$;

-- The versions of collection `collection_id`, for the reader's sight
-- (reader_sight.cpp): each version's columns as {"name": attnum}, and the
-- seq it holds from.
CREATE OR REPLACE FUNCTION changefeed.schema_attnums(collection_id int)
RETURNS TABLE (version int, attnums jsonb, since_seq bigint)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT s.version, (SELECT coalesce(jsonb_object_agg(e->>'name', (e->>'attnum')::int), '{}')
                         FROM jsonb_array_elements(s.columns) e), s.since_seq
      FROM changefeed.schema_version s
     WHERE s.collection_id = schema_attnums.collection_id
     ORDER BY s.version
$$;
