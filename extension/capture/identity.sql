-- changefeed: canonical document identity (extension/capture/identity.cpp).
--
-- A document id, partition key and tenant are texts of the row's values made
-- with fixed settings, whatever the session's: TimeZone UTC, DateStyle ISO
-- (YMD), IntervalStyle postgres, extra_float_digits 1, bytea_output hex.
-- Capture, partition expiry and keys-only reads make them in C; SQL that
-- makes them from a row (backfill) calls canonical_text().

-- The value's text as a document id or partition key holds it.
CREATE OR REPLACE FUNCTION changefeed.canonical_text(value anyelement) RETURNS text
    AS 'MODULE_PATHNAME', 'changefeed_canonical_text' LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- The SQL expression of a row's document id from its key columns, the row
-- aliased `alias`: the key's canonical text, or for a composite key a JSON
-- array of the texts (null for a null part), as capture writes it.
CREATE OR REPLACE FUNCTION changefeed.doc_id_sql(key_columns text[], alias text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN cardinality(key_columns) = 1
                THEN format('coalesce(changefeed.canonical_text(%I.%I), %L)', alias, key_columns[1], '')
                ELSE '''['' || concat_ws('','', '
                     || (SELECT string_agg(format('coalesce(to_json(changefeed.canonical_text(%I.%I))::text, %L)',
                                                  alias, k, 'null'), ', ' ORDER BY n)
                           FROM unnest(key_columns) WITH ORDINALITY u(k, n))
                     || ') || '']''' END
$$;

-- Whether values of a type have no canonical text: money (lc_monetary), the
-- reg* types (search_path and the catalog), or a type holding one.
CREATE OR REPLACE FUNCTION changefeed.session_formatted(type regtype) RETURNS bool
    AS 'MODULE_PATHNAME', 'changefeed_session_formatted' LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- CF003 when a column that makes document ids, partition keys or tenants
-- (`what`) is of such a type.
CREATE OR REPLACE FUNCTION changefeed.check_identity_columns(tbl regclass, cols text[], what text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    col text;
    typ regtype;
BEGIN
    FOREACH col IN ARRAY cols LOOP
        SELECT a.atttypid::regtype INTO typ FROM pg_attribute a
         WHERE a.attrelid = tbl AND a.attname = col AND a.attnum > 0 AND NOT a.attisdropped;
        IF changefeed.session_formatted(typ) THEN
            RAISE EXCEPTION '% column "%" of type % has no canonical text', what, col, typ
                USING ERRCODE = 'CF003',
                      DETAIL = 'Its text depends on the session (lc_monetary, search_path), so its document '
                               'ids, partition keys or tenants would too.',
                      HINT = 'Use a column of another type (numeric for money, oid or text for reg* types).';
        END IF;
    END LOOP;
END
$$;
