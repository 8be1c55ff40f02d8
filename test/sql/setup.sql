-- Helpers shared by the regression tests.
-- try(): runs a statement and shows its SQLSTATE and message instead of failing.
CREATE FUNCTION try(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END
$$;

-- Named cursors over the feed, advanced by next_changes().
CREATE TABLE cursor_state (name text PRIMARY KEY, pos text NOT NULL);

CREATE FUNCTION start_cursor(cursor_name text) RETURNS void LANGUAGE sql AS $$
    INSERT INTO cursor_state VALUES (cursor_name, changefeed.current_position())
    ON CONFLICT (name) DO UPDATE SET pos = excluded.pos
$$;

CREATE FUNCTION next_changes(cursor_name text, tbl regclass, n int DEFAULT 100,
                             read_mode text DEFAULT 'all', only_ranges int[] DEFAULT NULL)
RETURNS TABLE (seq bigint, range_id int, operation text, doc_id text, current jsonb,
               previous jsonb, ttl_expired bool, tenant text)
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    last text;
BEGIN
    FOR r IN SELECT * FROM changefeed.read(tbl, (SELECT c.pos FROM cursor_state c WHERE c.name = cursor_name),
                                           n, only_ranges, read_mode) LOOP
        seq := r.seq; range_id := r.range_id; operation := r.operation; doc_id := r.doc_id;
        current := r.current; previous := r.previous; ttl_expired := r.ttl_expired; tenant := r.tenant;
        last := r."position";
        RETURN NEXT;
    END LOOP;
    IF last IS NOT NULL THEN
        UPDATE cursor_state SET pos = last WHERE name = cursor_name;
    END IF;
END
$$;
