-- changefeed: keeps the extension's own tables out of logical replication.
--
-- A publication FOR ALL TABLES (the common form) would ship the change log's
-- partitions and the catalog tables (collections, leases, checkpoints) to
-- every subscriber.  One without changefeed fails on relations it does not
-- have; one with changefeed would apply another database's changes into its
-- own log.  PostgreSQL cannot leave tables out of FOR ALL TABLES, so in a
-- database with changefeed such a publication is refused (CF024), and so is
-- one that names the schema changefeed or one of its tables.  The
-- application's tables are published by schema (FOR TABLES IN SCHEMA public)
-- or by name; an enabled table on the subscriber takes the applied rows with
-- replicated => true (docs/operations.md).  A superuser who wants such a
-- publication anyway (its subscribers ignore the extension's tables) sets
-- changefeed.publication_guard = off.

-- Whether the guard is on (the library may not be loaded yet: the default).
CREATE OR REPLACE FUNCTION changefeed.publication_guard_on() RETURNS bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(nullif(current_setting('changefeed.publication_guard', true), '')::bool, true);
$$;

-- The publications among `pubs` that would ship the extension's tables.
CREATE OR REPLACE FUNCTION changefeed.shipping_publications(pubs oid[]) RETURNS TABLE (pubname name, why text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT p.pubname,
           CASE WHEN p.puballtables THEN 'it is FOR ALL TABLES'
                WHEN EXISTS (SELECT 1 FROM pg_publication_namespace n
                              WHERE n.pnpubid = p.oid AND n.pnnspid = 'changefeed'::regnamespace)
                    THEN 'it publishes the schema changefeed'
                ELSE 'it publishes ' || (SELECT string_agg(r.prrelid::regclass::text, ', ' ORDER BY r.prrelid)
                                           FROM pg_publication_rel r JOIN pg_class k ON k.oid = r.prrelid
                                          WHERE r.prpubid = p.oid AND k.relnamespace = 'changefeed'::regnamespace)
           END
      FROM pg_publication p
     WHERE p.oid = ANY (pubs)
       AND (p.puballtables
            OR EXISTS (SELECT 1 FROM pg_publication_namespace n
                        WHERE n.pnpubid = p.oid AND n.pnnspid = 'changefeed'::regnamespace)
            OR EXISTS (SELECT 1 FROM pg_publication_rel r JOIN pg_class k ON k.oid = r.prrelid
                        WHERE r.prpubid = p.oid AND k.relnamespace = 'changefeed'::regnamespace))
     ORDER BY p.pubname;
$$;

CREATE OR REPLACE FUNCTION changefeed.guard_publication() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    pubs oid[];
    bad record;
BEGIN
    IF NOT changefeed.publication_guard_on() THEN
        RETURN;
    END IF;
    -- The publications the command made or changed: itself, or the owner of
    -- a table or schema entry it added.
    SELECT array_agg(DISTINCT CASE cmd.classid
                                  WHEN 'pg_publication'::regclass THEN cmd.objid
                                  WHEN 'pg_publication_rel'::regclass
                                      THEN (SELECT r.prpubid FROM pg_publication_rel r WHERE r.oid = cmd.objid)
                                  WHEN 'pg_publication_namespace'::regclass
                                      THEN (SELECT n.pnpubid FROM pg_publication_namespace n WHERE n.oid = cmd.objid)
                              END)
      INTO pubs FROM pg_event_trigger_ddl_commands() cmd;
    SELECT * INTO bad FROM changefeed.shipping_publications(pubs) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'publication % would ship changefeed''s own tables to its subscribers: %', bad.pubname, bad.why
            USING ERRCODE = 'CF024',
                  DETAIL = 'The change log and its catalog are this database''s own; a subscriber would fail on them '
                           'or take another database''s changes into its log. PostgreSQL cannot leave tables out of '
                           'FOR ALL TABLES.',
                  HINT = 'Publish the application''s tables by schema (CREATE PUBLICATION ... FOR TABLES IN SCHEMA '
                         'public) or by name (FOR TABLE ...), or, to ship them anyway, SET changefeed.publication_guard '
                         '= off (superuser).';
    END IF;
END
$$;

CREATE EVENT TRIGGER changefeed_guard_publication ON ddl_command_end
    WHEN TAG IN ('CREATE PUBLICATION', 'ALTER PUBLICATION')
    EXECUTE FUNCTION changefeed.guard_publication();
ALTER EVENT TRIGGER changefeed_guard_publication ENABLE ALWAYS;

-- A publication FOR ALL TABLES made before the extension ships its tables
-- from now on: CREATE EXTENSION refuses, as the trigger would.
DO $$
DECLARE
    bad record;
BEGIN
    SELECT * INTO bad FROM changefeed.shipping_publications(ARRAY(SELECT oid FROM pg_catalog.pg_publication)) LIMIT 1;
    IF FOUND AND changefeed.publication_guard_on() THEN
        RAISE EXCEPTION 'publication % would ship changefeed''s own tables to its subscribers: %', bad.pubname, bad.why
            USING ERRCODE = 'CF024',
                  HINT = 'Publish the application''s tables by schema or by name instead (ALTER PUBLICATION ... '
                         'SET TABLES IN SCHEMA public, or drop and create it FOR TABLE ...), then create the extension.';
    END IF;
END
$$;
