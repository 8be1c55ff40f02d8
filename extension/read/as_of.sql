-- changefeed: the table as of a position, and the net change between two.
--
-- Both read the table and its all-versions feed in one snapshot, the calling
-- statement's (in REPEATABLE READ, the transaction's): every function here is
-- STABLE, so none of its statements takes a snapshot of its own.  The feed
-- from a position up to that snapshot holds exactly the changes the table
-- shows and the position had not seen; undoing them (each document's image
-- before its first change after the position) gives the table as it was.
-- They run as their caller: the table is scanned with the caller's rights and
-- row-level security, the feed is read by read_ranges(), which applies the
-- same rights, tenant binding and column privileges to the logged images.

-- Every change of `tbl` after `since` that the statement's snapshot sees, in
-- seq order within a range, read by read_ranges() over all ranges in pages
-- of 100,000.  CF004/CF005/CF017 for a bad position, CF006/CF019 for history
-- lost, CF021 for a collection that logs keys alone (as read() raises them);
-- CF026 for a position newer than the snapshot.
CREATE OR REPLACE FUNCTION changefeed.changes_after(tbl regclass, since text)
RETURNS TABLE (seq bigint, doc_id text, operation text, current jsonb, previous jsonb, event_id text)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    rs int[];
    ps text[];
    r record;
    more bool;
BEGIN
    IF since IS NULL THEN
        RAISE EXCEPTION 'position must not be null'
            USING ERRCODE = 'CF004',
                  HINT = 'Pass a position from changefeed.current_position(), position_at() or a read.';
    END IF;
    IF NOT changefeed.position_covers(changefeed.current_position(), since) THEN
        RAISE EXCEPTION 'the position is newer than this transaction''s snapshot'
            USING ERRCODE = 'CF026',
                  DETAIL = 'It saw commits this snapshot does not, so the table here cannot show the state it names.',
                  HINT = 'Call it in a new transaction, or in READ COMMITTED.';
    END IF;
    rs := ARRAY(SELECT generate_series(0, c.ranges - 1));
    ps := array_fill(since, ARRAY[c.ranges]);
    LOOP
        more := false;
        FOR r IN SELECT * FROM changefeed.read_ranges(tbl, rs, ps, 100000, 'all') LOOP
            IF r.seq IS NULL THEN
                FOR i IN 1 .. cardinality(rs) LOOP
                    IF rs[i] = ANY (r.resume_ranges) THEN
                        ps[i] := r."position";
                    END IF;
                END LOOP;
            ELSE
                more := true;
                seq := r.seq;
                doc_id := r.doc_id;
                operation := r.operation;
                current := r.current;
                previous := r.previous;
                event_id := r.event_id;
                RETURN NEXT;
            END IF;
        END LOOP;
        -- Every read of this function shares one snapshot: a read that finds
        -- nothing has read every range up to it.
        EXIT WHEN NOT more;
    END LOOP;
END
$$;

-- Per document changed after `since`: its image at `since` (`before`, null
-- when it did not exist then) and now (`after`, null when it does not exist
-- now), and the changes between (`event_ids`, in order).  CF025 when the log
-- cannot say: a clear (TRUNCATE) after the position, or a first change after
-- it logged without the image before (keep_previous off).
CREATE OR REPLACE FUNCTION changefeed.net_changes(tbl regclass, since text)
RETURNS TABLE (doc_id text, before jsonb, after jsonb, event_ids text[])
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    r record;
BEGIN
    FOR r IN
        WITH ch AS MATERIALIZED (SELECT * FROM changefeed.changes_after(tbl, since)),
        -- A move between two tenants a reader sees both of is a delete and a
        -- create of one seq: the delete comes first.
        firsts AS (SELECT DISTINCT ON (ch.doc_id) ch.doc_id, ch.operation, ch.previous FROM ch
                    WHERE ch.doc_id IS NOT NULL ORDER BY ch.doc_id, ch.seq, ch.operation <> 'delete'),
        lasts AS (SELECT DISTINCT ON (ch.doc_id) ch.doc_id, ch.operation, ch.current FROM ch
                   WHERE ch.doc_id IS NOT NULL ORDER BY ch.doc_id, ch.seq DESC, ch.operation = 'delete'),
        ids AS (SELECT ch.doc_id, array_agg(ch.event_id ORDER BY ch.seq) AS event_ids FROM ch
                 WHERE ch.doc_id IS NOT NULL GROUP BY ch.doc_id)
        SELECT 'a clear (TRUNCATE) was logged after it' AS problem, NULL AS doc_id, NULL::jsonb AS before,
               NULL::jsonb AS after, NULL::text[] AS event_ids
         WHERE EXISTS (SELECT 1 FROM ch WHERE ch.operation = 'clear')
        UNION ALL
        SELECT CASE WHEN f.operation <> 'create' AND f.previous IS NULL
                    THEN 'a change after it was logged without the image before it (keep_previous off)' END,
               f.doc_id,
               CASE WHEN f.operation = 'create' THEN NULL ELSE f.previous END,
               CASE WHEN l.operation = 'delete' THEN NULL ELSE l.current END,
               i.event_ids
          FROM firsts f JOIN lasts l USING (doc_id) JOIN ids i USING (doc_id)
    LOOP
        IF r.problem IS NOT NULL THEN
            RAISE EXCEPTION 'cannot rebuild % at the position: %', tbl, r.problem
                USING ERRCODE = 'CF025',
                      DETAIL = 'The table at a position is the table now with the changes after it undone, by '
                               'the image logged before each.',
                      HINT = 'Use a position taken after it.';
        END IF;
        doc_id := r.doc_id;
        before := r.before;
        after := r.after;
        event_ids := r.event_ids;
        RETURN NEXT;
    END LOOP;
END
$$;

-- The rows of `tbl` at position `pos`, as documents: the table now, each
-- document changed since undone to its image before its first change
-- (left out when created since).  Documents read from the table are
-- to_jsonb() of the row in the caller's session (its TimeZone for
-- timestamptz) with only the columns the caller may SELECT, and the rows of
-- its bound tenants; those taken from the log are the images as logged.  No
-- order.
CREATE OR REPLACE FUNCTION changefeed.as_of(tbl regclass, pos text)
RETURNS TABLE (doc_id text, document jsonb)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    c changefeed.collection := changefeed.collection_of(tbl);
    cols text[];
    hidden int;
    document text;
    tenant_cond text := 'true';
    bound text[] := changefeed.bound_tenants();
BEGIN
    SELECT array_agg(a.attname::text ORDER BY a.attnum) FILTER (WHERE has_column_privilege(tbl, a.attnum, 'SELECT')),
           count(*) FILTER (WHERE NOT has_column_privilege(tbl, a.attnum, 'SELECT'))
      INTO cols, hidden
      FROM pg_attribute a WHERE a.attrelid = tbl AND a.attnum > 0 AND NOT a.attisdropped;
    IF cols IS NULL THEN
        RAISE EXCEPTION 'permission denied for table %', tbl USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Only the columns it may SELECT, under their names.
    document := CASE WHEN hidden = 0 THEN 'to_jsonb(t)'
                     ELSE '(SELECT to_jsonb(v) FROM (SELECT ' || (SELECT string_agg(format('t.%I', x), ', ')
                                                                    FROM unnest(cols) x) || ') v)' END;
    IF cardinality(bound) > 0 THEN
        IF c.tenant_column IS NULL THEN
            RAISE EXCEPTION 'permission denied to read %', tbl
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = 'The role is bound to a tenant and the table has no tenant column.';
        END IF;
        tenant_cond := format('changefeed.canonical_text(t.%I) = ANY ($3)', c.tenant_column);
    END IF;
    RETURN QUERY EXECUTE format(
        'WITH ch AS MATERIALIZED (SELECT * FROM changefeed.net_changes($1, $2))'
        ' SELECT n.doc_id, n.document FROM (SELECT %s AS doc_id, %s AS document FROM %s t WHERE %s) n'
        '  WHERE NOT EXISTS (SELECT 1 FROM ch WHERE ch.doc_id = n.doc_id)'
        ' UNION ALL'
        ' SELECT ch.doc_id, ch.before FROM ch WHERE ch.before IS NOT NULL',
        changefeed.doc_id_sql(c.key_columns, 't'), document, tbl, tenant_cond)
    USING tbl, pos, bound;
END
$$;

-- What changed in `tbl` between positions `since` and `upto` (upto at or
-- after since), per document: operation create (with `current`), delete
-- (with `previous`) or replace (both), the net effect of every change
-- between; a document back to its image at `since` is left out.  event_ids:
-- the changes it sums up, in order.  22023 when `upto` is before `since`.
CREATE OR REPLACE FUNCTION changefeed.diff(tbl regclass, since text, upto text)
RETURNS TABLE (doc_id text, operation text, current jsonb, previous jsonb, event_ids text[])
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
#variable_conflict use_column
DECLARE
    r record;
BEGIN
    -- The changes after `since` and not after `upto`, both read in this
    -- snapshot: exactly those between, windows being paged included.
    FOR r IN
        WITH early AS MATERIALIZED (SELECT * FROM changefeed.net_changes(tbl, since)),
             late AS MATERIALIZED (SELECT * FROM changefeed.net_changes(tbl, upto)),
             -- A document's image at `upto`: its image before its first
             -- change after `upto`, or now when it has none.
             net AS (SELECT e.doc_id, e.before,
                            CASE WHEN l.doc_id IS NULL THEN e.after ELSE l.before END AS after,
                            e.event_ids[1:cardinality(e.event_ids) - coalesce(cardinality(l.event_ids), 0)] AS event_ids
                       FROM early e LEFT JOIN late l USING (doc_id))
        SELECT true AS reversed, NULL AS doc_id, NULL AS operation, NULL::jsonb AS current, NULL::jsonb AS previous,
               NULL::text[] AS event_ids
         WHERE EXISTS (SELECT 1 FROM late l LEFT JOIN early e USING (doc_id)
                        WHERE NOT l.event_ids <@ coalesce(e.event_ids, '{}'))
        UNION ALL
        SELECT false, n.doc_id,
               CASE WHEN n.before IS NULL THEN 'create' WHEN n.after IS NULL THEN 'delete' ELSE 'replace' END,
               n.after, n.before, n.event_ids
          FROM net n
         WHERE n.before IS DISTINCT FROM n.after AND cardinality(n.event_ids) > 0
    LOOP
        IF r.reversed THEN
            RAISE EXCEPTION 'the second position is before the first'
                USING ERRCODE = '22023',
                      HINT = 'Pass the earlier position first: diff(tbl, since, upto).';
        END IF;
        doc_id := r.doc_id;
        operation := r.operation;
        current := r.current;
        previous := r.previous;
        event_ids := r.event_ids;
        RETURN NEXT;
    END LOOP;
END
$$;
