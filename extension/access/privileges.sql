-- changefeed: the privileges of tables, views and the schema (docs/security.md).
--
-- The functions' privileges and the entry points come before this file,
-- generated from extension/surface.manifest (extension/build_sql.py).  This
-- file and any after it run whole again in every upgrade script: they hold
-- only statements that may.

-- Made after its entry point, which it calls (processors/status.sql).
CREATE OR REPLACE VIEW changefeed.processor_status AS
SELECT * FROM changefeed.processor_status_rows();

-- PUBLIC gets nothing: not the schema, not a table, no function but
-- capture_row() (surface.manifest).
REVOKE ALL ON ALL TABLES IN SCHEMA changefeed FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA changefeed FROM PUBLIC;
REVOKE ALL ON SCHEMA changefeed FROM PUBLIC;

GRANT USAGE ON SCHEMA changefeed TO changefeed_reader;
GRANT SELECT ON changefeed.collections, changefeed.horizons, changefeed.processor_status TO changefeed_reader;
GRANT SELECT ON changefeed.leases TO changefeed_processor;
GRANT SELECT ON changefeed.tenant_bindings TO changefeed_admin;
