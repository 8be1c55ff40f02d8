-- Instance registry: one live session per instance name of a processor,
-- checked as processor roles.  Several sessions at once: specs/instances.spec.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
CREATE ROLE regress_inst_owner LOGIN IN ROLE changefeed_reader;
CREATE ROLE regress_inst_p1 LOGIN IN ROLE changefeed_processor;
CREATE ROLE regress_inst_p2 LOGIN IN ROLE changefeed_processor;
GRANT CREATE ON SCHEMA public TO regress_inst_owner;
RESET client_min_messages;
SET ROLE regress_inst_owner;
CREATE TABLE inst_items (id int PRIMARY KEY, v text);
SELECT changefeed.enable('inst_items', ranges => 4) > 0 AS enabled;
GRANT SELECT ON inst_items TO regress_inst_p1, regress_inst_p2;
RESET ROLE;

SET ROLE regress_inst_p1;
SELECT changefeed.lease_init('inst_items', 'billing');
SELECT changefeed.instance_register('inst_items', 'billing', 'host-a', 'token-1');
SELECT instance, live, registered_at <= heartbeat_at AS ordered FROM changefeed.instances('inst_items', 'billing');
-- Registering again with the same token (a reconnect) refreshes the row.
SELECT changefeed.instance_register('inst_items', 'billing', 'host-a', 'token-1');
SELECT count(*) FROM changefeed.instances('inst_items', 'billing');
-- The name changes hands within one session (its previous holder was this
-- very session): the leases filed under it are fenced with a new epoch.
SELECT count(*) AS taken FROM changefeed.lease_acquire('inst_items', 'billing', 'host-a', '1 minute');
SELECT changefeed.instance_register('inst_items', 'billing', 'host-a', 'token-2');
SELECT try($$SELECT changefeed.lease_checkpoint('inst_items', 'billing', 0, 'host-a', 1, changefeed.current_position())$$);
SELECT range_id, epoch FROM changefeed.lease_acquire('inst_items', 'billing', 'host-a', '1 minute') ORDER BY 1;
-- Only the holder's token removes the registration.
SELECT changefeed.instance_unregister('inst_items', 'billing', 'host-a', 'token-1') AS removed;
SELECT changefeed.instance_unregister('inst_items', 'billing', 'host-a', 'token-2') AS removed;
SELECT count(*) FROM changefeed.instances('inst_items', 'billing');
-- Bad input.
SELECT try($$SELECT changefeed.instance_register('inst_items', 'billing', 'host-a', '')$$);
SELECT try($$SELECT changefeed.instance_register('inst_items', 'billing', ' ', 'token')$$);
SELECT try($$SELECT changefeed.instance_register('inst_items', '', 'host-a', 'token')$$);
SELECT try($$SELECT changefeed.instance_register('inst_items', 'billing', 'host-a', NULL)$$);
SELECT try($$SELECT changefeed.instance_register('inst_items', 'billing', 'host-a', 'token', '0 seconds')$$);

-- Behind a transaction pooler an instance registers with a hold: clients
-- share server sessions, so the session proves nothing.  A second client
-- whose call lands on the very session the first one registered from is
-- refused while the hold lasts.
SELECT changefeed.instance_register('inst_items', 'billing', 'pooled-a', 'token-p1', '1 minute');
SELECT instance, live FROM changefeed.instances('inst_items', 'billing') WHERE instance = 'pooled-a';
SELECT try($$SELECT changefeed.instance_register('inst_items', 'billing', 'pooled-a', 'token-p2', '1 minute')$$);
SELECT try($$SELECT changefeed.instance_register('inst_items', 'billing', 'pooled-a', 'token-p2')$$);
-- Its own token registers again (a reconnect).  Lease calls renew the hold.
SELECT changefeed.instance_register('inst_items', 'billing', 'pooled-a', 'token-p1', '1 minute');
SELECT count(*) FROM changefeed.lease_keep('inst_items', 'billing', 'pooled-a', '2 hours') k;
RESET ROLE;
SELECT held_until > now() + interval '1 hour' AS renewed, backend_pid FROM changefeed.instance
 WHERE instance = 'pooled-a';
-- A hold that ended frees the name, whatever session the next one comes from.
UPDATE changefeed.instance SET held_until = now() - interval '1 second' WHERE instance = 'pooled-a';
SET ROLE regress_inst_p1;
SELECT instance, live FROM changefeed.instances('inst_items', 'billing') WHERE instance = 'pooled-a';
SELECT changefeed.instance_register('inst_items', 'billing', 'pooled-a', 'token-p2', '1 minute');
SELECT changefeed.instance_unregister('inst_items', 'billing', 'pooled-a', 'token-p2') AS removed;
RESET ROLE;

-- Another role may not register, unregister or list the processor's instances.
SET ROLE regress_inst_p1;
SELECT changefeed.instance_register('inst_items', 'billing', 'host-b', 'token-3');
RESET ROLE;
SET ROLE regress_inst_p2;
SELECT try($$SELECT changefeed.instance_register('inst_items', 'billing', 'host-c', 'token-4')$$);
SELECT try($$SELECT changefeed.instance_unregister('inst_items', 'billing', 'host-b', 'token-3')$$);
SELECT try($$SELECT * FROM changefeed.instances('inst_items', 'billing')$$);
-- Its own processor on the same table is its own business.
SELECT changefeed.lease_init('inst_items', 'audit');
SELECT changefeed.instance_register('inst_items', 'audit', 'host-b', 'token-5');
SELECT instance FROM changefeed.instances('inst_items', 'audit');
RESET ROLE;
-- The registry is reached only through the functions.
SET ROLE regress_inst_p1;
SELECT try($$SELECT * FROM changefeed.instance$$);
-- drop_processor() forgets the instances too.
SELECT changefeed.drop_processor('inst_items', 'billing');
RESET ROLE;
SELECT processor, instance FROM changefeed.instance ORDER BY 1, 2;

SELECT changefeed.disable('inst_items', forget => true);
SELECT count(*) AS left_over FROM changefeed.instance;
DROP TABLE inst_items;
DROP OWNED BY regress_inst_owner, regress_inst_p1, regress_inst_p2;
DROP ROLE regress_inst_owner, regress_inst_p1, regress_inst_p2;
