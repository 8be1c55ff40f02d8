-- A normalized description of everything the changefeed extension owns in the
-- current database, one "object: property = value" line each, sorted, so that
-- two databases (a fresh install and an upgraded one) compare with diff.
--
-- Covered: every member object (pg_depend deptype 'e') listed by identity,
-- and in detail the schema, functions, tables, views, sequences, types, event
-- triggers and casts; the extension's config tables, its version, the roles
-- it makes, the default privileges of the database, and comments.  Names
-- only, never OIDs.
--
-- Normalized: the daily partitions of changefeed.log are named after the day
-- they were created for (log_YYYYMMDD), and ACLs are compared as sorted sets
-- with NULL read as the owner's default.  Column positions are physical
-- (attnum) and dropped columns are listed: the capture code forms log rows by
-- position, so an upgraded table must have the layout of a fresh one.
--
-- Usage: psql -X -At -v ON_ERROR_STOP=1 -f test/stages/upgrade/describe.sql DB
SET search_path = pg_catalog;
SET datestyle = 'ISO, YMD';
SET intervalstyle = 'postgres';
SET extra_float_digits = 3;

WITH ext AS (
    SELECT * FROM pg_extension WHERE extname = 'changefeed'
),
member AS (
    SELECT d.classid, d.objid, d.objsubid
      FROM pg_depend d, ext
     WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
),
rel AS (
    SELECT c.*, regexp_replace(c.oid::regclass::text, 'log_[0-9]{8}', 'log_YYYYMMDD') AS name
      FROM pg_class c JOIN member m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
),
fn AS (
    SELECT p.*, p.oid::regprocedure::text AS name
      FROM pg_proc p JOIN member m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
),
typ AS (
    SELECT t.*, t.oid::regtype::text AS name
      FROM pg_type t JOIN member m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
),
lines(obj, prop, val) AS (
    -- The extension itself.
    SELECT 'extension changefeed', 'version', extversion FROM ext
    UNION ALL SELECT 'extension changefeed', 'owner', extowner::regrole::text FROM ext
    UNION ALL SELECT 'extension changefeed', 'schema', extnamespace::regnamespace::text FROM ext
    UNION ALL SELECT 'extension changefeed', 'relocatable', extrelocatable::text FROM ext
    UNION ALL
    SELECT 'extension changefeed', 'config table ' || c.cfg::regclass::text,
           'condition ' || quote_literal(coalesce(ext.extcondition[c.i], '<none>'))
      FROM ext, unnest(ext.extconfig) WITH ORDINALITY AS c(cfg, i)
    UNION ALL
    SELECT 'extension changefeed', 'comment', coalesce(obj_description(ext.oid, 'pg_extension'), '<none>') FROM ext

    -- Every member by identity, so that an object of a class not described
    -- below still shows when it is missing or extra.
    UNION ALL
    SELECT DISTINCT 'members', regexp_replace(pg_describe_object(classid, objid, objsubid), 'log_[0-9]{8}', 'log_YYYYMMDD'),
           'member'
      FROM member

    -- The schema.
    UNION ALL
    SELECT 'schema ' || n.nspname, p.prop, p.val
      FROM pg_namespace n JOIN member m ON m.classid = 'pg_namespace'::regclass AND m.objid = n.oid
     CROSS JOIN LATERAL (VALUES
        ('owner', n.nspowner::regrole::text),
        ('acl', array_to_string(ARRAY(SELECT a::text FROM unnest(coalesce(n.nspacl, acldefault('n', n.nspowner))) a ORDER BY 1), ' ')),
        ('comment', coalesce(obj_description(n.oid, 'pg_namespace'), '<none>'))) p(prop, val)

    -- Functions and procedures.
    UNION ALL
    SELECT 'function ' || f.name, p.prop, p.val
      FROM fn f
     CROSS JOIN LATERAL (VALUES
        ('kind', f.prokind::text),
        ('arguments', pg_get_function_arguments(f.oid)),
        ('result', coalesce(pg_get_function_result(f.oid), '<none>')),
        ('language', (SELECT lanname FROM pg_language WHERE oid = f.prolang)::text),
        ('volatility', f.provolatile::text),
        ('strict', f.proisstrict::text),
        ('parallel', f.proparallel::text),
        ('security definer', f.prosecdef::text),
        ('leakproof', f.proleakproof::text),
        ('cost', f.procost::text),
        ('rows', f.prorows::text),
        ('config', coalesce(array_to_string(f.proconfig, ' '), '<none>')),
        ('owner', f.proowner::regrole::text),
        ('acl', array_to_string(ARRAY(SELECT a::text FROM unnest(coalesce(f.proacl, acldefault('f', f.proowner))) a ORDER BY 1), ' ')),
        ('symbol', coalesce(f.probin || ' ' || f.prosrc, '<none>')),
        ('comment', coalesce(obj_description(f.oid, 'pg_proc'), '<none>'))) p(prop, val)
    UNION ALL
    -- The full definition, a line each, so that a diff points at the line.
    SELECT 'function ' || f.name, 'definition line ' || lpad(d.n::text, 4, '0'), d.line
      FROM fn f
     CROSS JOIN LATERAL regexp_split_to_table(
            CASE WHEN f.prokind = 'a' THEN '<aggregate>' ELSE pg_get_functiondef(f.oid) END, E'\n')
            WITH ORDINALITY AS d(line, n)

    -- Tables, partitioned tables, views, sequences, foreign tables.
    UNION ALL
    SELECT DISTINCT 'relation ' || r.name, p.prop, p.val
      FROM rel r
     CROSS JOIN LATERAL (VALUES
        ('kind', r.relkind::text),
        ('persistence', r.relpersistence::text),
        ('owner', r.relowner::regrole::text),
        ('acl', array_to_string(ARRAY(SELECT a::text FROM unnest(coalesce(r.relacl,
                    acldefault(CASE WHEN r.relkind = 'S' THEN 's' ELSE 'r' END::"char", r.relowner))) a ORDER BY 1), ' ')),
        ('options', coalesce(nullif(array_to_string(ARRAY(SELECT o FROM unnest(r.reloptions) o ORDER BY 1), ' '), ''), '<none>')),
        ('row security', r.relrowsecurity::text || ' force ' || r.relforcerowsecurity::text),
        ('replica identity', r.relreplident::text),
        ('access method', coalesce((SELECT amname FROM pg_am WHERE oid = r.relam)::text, '<none>')),
        ('partition key', coalesce(CASE WHEN r.relkind = 'p' THEN pg_get_partkeydef(r.oid) END, '<none>')),
        ('partition of', coalesce((SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = r.oid), '<none>')),
        ('partition bound', coalesce(regexp_replace(pg_get_expr(r.relpartbound, r.oid),
                    '''[0-9]{4}-[0-9]{2}-[0-9]{2}[^'']*''', '''<day>''', 'g'), '<none>')),
        ('comment', coalesce(obj_description(r.oid, 'pg_class'), '<none>'))) p(prop, val)
    UNION ALL
    -- Columns at their physical positions (dropped ones too).
    SELECT DISTINCT 'relation ' || r.name, 'column ' || lpad(a.attnum::text, 3, '0'),
           CASE WHEN a.attisdropped THEN '<dropped>' ELSE
               quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
               || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
               || coalesce(' DEFAULT ' || pg_get_expr(ad.adbin, ad.adrelid), '')
               || CASE a.attidentity WHEN 'a' THEN ' GENERATED ALWAYS AS IDENTITY'
                                     WHEN 'd' THEN ' GENERATED BY DEFAULT AS IDENTITY' ELSE '' END
               || CASE WHEN a.attgenerated = 's' THEN ' STORED' ELSE '' END
               || CASE WHEN a.attcollation <> 0 AND a.attcollation <> (SELECT typcollation FROM pg_type WHERE oid = a.atttypid)
                       THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END
               || ' storage ' || a.attstorage::text
               || coalesce(' stattarget ' || nullif(a.attstattarget, -1)::text, '')
               || coalesce(' acl ' || nullif(array_to_string(ARRAY(SELECT x::text FROM unnest(a.attacl) x ORDER BY 1), ' '), ''), '')
               || coalesce(' comment ' || quote_literal(col_description(r.oid, a.attnum)), '')
           END
      FROM rel r
      JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0
      LEFT JOIN pg_attrdef ad ON ad.adrelid = r.oid AND ad.adnum = a.attnum
    UNION ALL
    SELECT DISTINCT 'relation ' || r.name,
           'constraint ' || regexp_replace(c.conname, 'log_[0-9]{8}', 'log_YYYYMMDD'),
           pg_get_constraintdef(c.oid, true)
      FROM rel r JOIN pg_constraint c ON c.conrelid = r.oid
    UNION ALL
    SELECT DISTINCT 'relation ' || r.name,
           'index ' || regexp_replace(i.indexrelid::regclass::text, 'log_[0-9]{8}', 'log_YYYYMMDD'),
           regexp_replace(pg_get_indexdef(i.indexrelid), 'log_[0-9]{8}', 'log_YYYYMMDD', 'g')
           || CASE WHEN i.indisclustered THEN ' CLUSTERED' ELSE '' END
           || CASE WHEN i.indisreplident THEN ' REPLICA IDENTITY' ELSE '' END
           || coalesce(' options ' || array_to_string(ic.reloptions, ' '), '')
      FROM rel r JOIN pg_index i ON i.indrelid = r.oid JOIN pg_class ic ON ic.oid = i.indexrelid
    UNION ALL
    SELECT DISTINCT 'relation ' || r.name, 'trigger ' || t.tgname,
           regexp_replace(pg_get_triggerdef(t.oid, true), 'log_[0-9]{8}', 'log_YYYYMMDD', 'g')
           || ' enabled ' || t.tgenabled::text
      FROM rel r JOIN pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
    UNION ALL
    SELECT DISTINCT 'relation ' || r.name, 'policy ' || p.polname,
           p.polcmd::text || ' permissive ' || p.polpermissive::text
           || ' to ' || array_to_string(ARRAY(SELECT CASE WHEN x = 0 THEN 'public' ELSE x::regrole::text END
                                              FROM unnest(p.polroles) x ORDER BY 1), ',')
           || coalesce(' using ' || pg_get_expr(p.polqual, p.polrelid), '')
           || coalesce(' check ' || pg_get_expr(p.polwithcheck, p.polrelid), '')
      FROM rel r JOIN pg_policy p ON p.polrelid = r.oid
    UNION ALL
    SELECT DISTINCT 'relation ' || r.name, 'rule ' || w.rulename, pg_get_ruledef(w.oid, true)
      FROM rel r JOIN pg_rewrite w ON w.ev_class = r.oid AND w.rulename <> '_RETURN'
    UNION ALL
    SELECT 'relation ' || r.name, 'view line ' || lpad(d.n::text, 4, '0'), d.line
      FROM rel r
     CROSS JOIN LATERAL regexp_split_to_table(pg_get_viewdef(r.oid, true), E'\n') WITH ORDINALITY AS d(line, n)
     WHERE r.relkind IN ('v', 'm')
    UNION ALL
    SELECT 'relation ' || r.name, 'sequence',
           format('%s start %s increment %s min %s max %s cache %s cycle %s', s.seqtypid::regtype, s.seqstart,
                  s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle)
           || coalesce(' owned by ' || (SELECT d.refobjid::regclass::text || '.' || quote_ident(a.attname)
                                          FROM pg_depend d
                                          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                                         WHERE d.classid = 'pg_class'::regclass AND d.objid = r.oid
                                           AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')), '')
      FROM rel r JOIN pg_sequence s ON s.seqrelid = r.oid
    UNION ALL
    -- What the install script leaves in the extension's tables (a fresh
    -- install and an upgrade start empty alike, or with the same rows).
    SELECT DISTINCT 'relation ' || r.name, 'rows',
           (xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM ONLY %s', r.oid::regclass), false, false, '')))[1]::text
      FROM rel r WHERE r.relkind = 'r'

    -- Types made by the extension (a table's row type belongs to its table).
    UNION ALL
    SELECT 'type ' || t.name, p.prop, p.val
      FROM typ t
     CROSS JOIN LATERAL (VALUES
        ('kind', t.typtype::text),
        ('owner', t.typowner::regrole::text),
        ('acl', array_to_string(ARRAY(SELECT a::text FROM unnest(coalesce(t.typacl, acldefault('T', t.typowner))) a ORDER BY 1), ' ')),
        ('base', coalesce(nullif(t.typbasetype, 0)::regtype::text, '<none>') || ' not null ' || t.typnotnull::text
                 || coalesce(' default ' || t.typdefault, '')),
        ('labels', coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid), '<none>')),
        ('attributes', coalesce((SELECT string_agg(quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum)
                                   FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped), '<none>')),
        ('range of', coalesce((SELECT rngsubtype::regtype::text FROM pg_range WHERE rngtypid = t.oid), '<none>')),
        ('comment', coalesce(obj_description(t.oid, 'pg_type'), '<none>'))) p(prop, val)
    UNION ALL
    SELECT 'type ' || t.name, 'constraint ' || c.conname, pg_get_constraintdef(c.oid, true)
      FROM typ t JOIN pg_constraint c ON c.contypid = t.oid

    -- Event triggers.
    UNION ALL
    SELECT 'event trigger ' || e.evtname, p.prop, p.val
      FROM pg_event_trigger e JOIN member m ON m.classid = 'pg_event_trigger'::regclass AND m.objid = e.oid
     CROSS JOIN LATERAL (VALUES
        ('event', e.evtevent::text),
        ('function', e.evtfoid::regprocedure::text),
        ('enabled', e.evtenabled::text),
        ('tags', coalesce(nullif(array_to_string(ARRAY(SELECT x FROM unnest(e.evttags) x ORDER BY 1), ','), ''), '<all>')),
        ('owner', e.evtowner::regrole::text),
        ('comment', coalesce(obj_description(e.oid, 'pg_event_trigger'), '<none>'))) p(prop, val)

    -- Casts.
    UNION ALL
    SELECT format('cast (%s AS %s)', c.castsource::regtype, c.casttarget::regtype), 'definition',
           coalesce(nullif(c.castfunc, 0)::regprocedure::text, '<no function>')
           || ' context ' || c.castcontext::text || ' method ' || c.castmethod::text
      FROM pg_cast c JOIN member m ON m.classid = 'pg_cast'::regclass AND m.objid = c.oid

    -- The roles the install script makes (shared by the cluster: test/stages/upgrade.sh
    -- updates before it installs afresh, so the upgrade must make its own).
    UNION ALL
    SELECT 'role ' || r.rolname, 'attributes',
           concat_ws(' ', CASE WHEN r.rolcanlogin THEN 'LOGIN' ELSE 'NOLOGIN' END,
                     CASE WHEN r.rolsuper THEN 'SUPERUSER' END, CASE WHEN r.rolinherit THEN 'INHERIT' END,
                     CASE WHEN r.rolcreaterole THEN 'CREATEROLE' END, CASE WHEN r.rolcreatedb THEN 'CREATEDB' END,
                     CASE WHEN r.rolbypassrls THEN 'BYPASSRLS' END)
           || coalesce(' member of ' || (SELECT string_agg(m.roleid::regrole::text, ',' ORDER BY 1)
                                           FROM pg_auth_members m WHERE m.member = r.oid), '')
      FROM pg_roles r WHERE r.rolname LIKE 'changefeed\_%'

    -- Default privileges anyone set in this database (the install script may
    -- set some; a fresh database has none).
    UNION ALL
    SELECT 'default privileges', format('for %s in %s on %s', d.defaclrole::regrole,
                                        coalesce(nullif(d.defaclnamespace, 0)::regnamespace::text, '<all schemas>'),
                                        d.defaclobjtype),
           array_to_string(ARRAY(SELECT a::text FROM unnest(d.defaclacl) a ORDER BY 1), ' ')
      FROM pg_default_acl d
)
SELECT DISTINCT obj || ': ' || prop || ' = ' || val AS line
  FROM lines
 ORDER BY 1;
