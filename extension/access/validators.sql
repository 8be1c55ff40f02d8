-- changefeed: argument checks shared by several entry points, so that each
-- rule and its error are written once.

-- CF002 unless a table is given.
CREATE OR REPLACE FUNCTION changefeed.check_table(tbl regclass) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'CF002';
    END IF;
END
$$;

-- SQLSTATE `errcode` unless the argument `what` is `n` from `lo` to `hi`.
CREATE OR REPLACE FUNCTION changefeed.check_between(what text, n int, lo int, hi int, errcode text) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF n IS NULL OR n < lo OR n > hi THEN
        RAISE EXCEPTION '% must be between % and %, not %', what, lo, hi, coalesce(n::text, 'null')
            USING ERRCODE = errcode;
    END IF;
END
$$;

-- CF003 unless `n` is a number of ranges a collection may have.
CREATE OR REPLACE FUNCTION changefeed.check_ranges_count(n int) RETURNS void
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT changefeed.check_between('ranges', n, 1, 4096, 'CF003');
$$;

-- 22023 unless `mode` and `max_changes` are arguments read() and
-- read_ranges() accept.
CREATE OR REPLACE FUNCTION changefeed.check_read_args(mode text, max_changes int) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF mode IS NULL OR mode NOT IN ('all', 'latest', 'all_with_schema') THEN
        RAISE EXCEPTION 'mode must be ''all'', ''all_with_schema'' or ''latest'', not %',
                        coalesce(quote_literal(mode), 'null')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM changefeed.check_between('max_changes', max_changes, 1, 100000, '22023');
END
$$;

-- CF020 unless every id of `range_ids` (null = all) is a range of `c`: a
-- caller naming a range the collection does not have learnt its number of
-- ranges before it changed.
CREATE OR REPLACE FUNCTION changefeed.check_range_ids(c changefeed.collection, range_ids int[]) RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF range_ids IS NOT NULL
       AND (cardinality(range_ids) = 0
            OR EXISTS (SELECT 1 FROM unnest(range_ids) r WHERE r IS NULL OR r < 0 OR r >= c.ranges)) THEN
        RAISE EXCEPTION 'range ids must be between 0 and %', c.ranges - 1
            USING ERRCODE = 'CF020';
    END IF;
END
$$;
