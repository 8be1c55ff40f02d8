# PGXS build of the changefeed extension (extension/: one folder a stage of
# the pipeline, each with its C++ and its SQL; extension/README.md).
# `make && make install`, then `make installcheck` against a running server
# (test/run-all.sh starts one; see README.md).

MODULE_big = changefeed
OBJS = \
	extension/module.o \
	extension/settings.o \
	extension/capture/xact_tracking.o \
	extension/capture/identity.o \
	extension/capture/capture.o \
	extension/capture/schema_versions.o \
	extension/capture/row_image.o \
	extension/capture/previous_patch.o \
	extension/capture/range_hash.o \
	extension/log/log_writer.o \
	extension/read/current_rows.o \
	extension/read/read_memory.o \
	extension/read/log_partitions.o \
	extension/read/window_filter.o \
	extension/read/window_scan.o \
	extension/read/window_plan.o \
	extension/read/ranges_plan.o \
	extension/read/latest.o \
	extension/read/output.o \
	extension/read/long_poll.o \
	extension/read/read_window.o \
	extension/wake/notifier.o \
	extension/wake/wait_alone.o \
	extension/wake/worker_transaction.o \
	extension/position/position.o \
	extension/position/position_codec.o \
	extension/position/position_key.o \
	extension/position/position_history.o \
	extension/guard/guard.o \
	extension/guard/rewrites.o \
	extension/guard/partition_drops.o \
	extension/access/caller.o \
	extension/access/as_owner.o \
	extension/access/reader_sight.o \
	extension/maintenance/maintainer.o \
	extension/maintenance/maintenance_limits.o \
	extension/maintenance/ttl.o \
	extension/scale_out/collect.o

EXTENSION = extension/changefeed
EXTVERSION = 0.3
# The install script is assembled from one file per concern, in the order of
# the manifest's `sql` lines, and
# the SQL surface (entry points, privileges) generated from
# extension/surface.manifest; each upgrade script to this version from its
# hand-written delta (tables, data) and the concern files' functions
# (extension/build_sql.py, whose header says how).
SQL_PARTS = extension/sqlstates.sql $(filter-out extension/releases/% extension/upgrade/%,$(wildcard extension/*/*.sql))
SQL_BUILD = extension/build_sql.py extension/surface.manifest $(SQL_PARTS)
UPGRADE_DELTAS = $(wildcard extension/upgrade/delta/*--$(EXTVERSION).sql)
DATA_built = extension/changefeed--$(EXTVERSION).sql \
	$(patsubst extension/upgrade/delta/%.sql,extension/changefeed--%.sql,$(UPGRADE_DELTAS))
# Released install scripts stay installable, and each release has an upgrade
# path to this version (test/stages/upgrade.sh, test/stages/releases.sh): released upgrade
# scripts are frozen in extension/upgrade/, those to this version built.
DATA = $(wildcard extension/releases/changefeed--*.sql) $(wildcard extension/upgrade/changefeed--*--*.sql)

# Tests that need the library preloaded are skipped on a plain cluster with
# `make installcheck REGRESS_PRELOADED= ISOLATION_PRELOADED=`.
REGRESS_COMMON = setup enable capture read positions retention lag wait_for leases publications instances ranges start_positions maintenance privileges integrity dedup keep range_change processor_admin status trust_tenants trust_admin processor_names partition_drops row_security
# Write paths of newer servers (MERGE ... RETURNING, RETURNING OLD/NEW), with
# expected outputs per major: write_paths.out 18, _1 17, _2 15 and 16.
REGRESS_COMMON += write_paths
# Bulk statements' order across savepoints (log_writer.cpp keeps the partition open).
REGRESS_COMMON += bulk_order
# Collections that log keys alone (images => 'keys', current_rows.cpp).
REGRESS_COMMON += images_keys
# Document ids, partition keys and tenants in canonical text (identity.cpp).
REGRESS_COMMON += canonical_identity
# Row images built straight from the tuple agree with to_jsonb() (row_image.cpp).
REGRESS_COMMON += row_images
# Images from before a replace stored as patches, read whole (previous_patch.cpp).
REGRESS_COMMON += previous_patch
# Reads keep their memory between calls (read_memory.cpp).
REGRESS_COMMON += read_memory
# Schema versions, schema changes in the feed, images by column identity (capture/schema.sql).
REGRESS_COMMON += schema_changes
# DDL that would change stored values without a row trigger (rewrites.cpp, guard.cpp).
REGRESS_COMMON += rewrites
# Partitions under roles that are not superusers: names resolved as the
# command's role, expiry past row-level security, owners' partition DDL.
REGRESS_COMMON += trust_partitions
# The table as of a position and the net change between two (read/as_of.sql).
REGRESS_COMMON += as_of
# A filtered read as a view: replaces that enter or leave it (window_filter.cpp).
REGRESS_COMMON += filter_moves
REGRESS_PRELOADED = notifier ticks workers long_poll prepared
REGRESS = $(REGRESS_COMMON) $(REGRESS_PRELOADED)
REGRESS_OPTS = --inputdir=test --load-extension=changefeed
ISOLATION = late_commit row_order concurrent_reader partition_race lease_fence lease_expiry_race instance_names start_at read_ranges_late_commit open_xact_late_commit range_change_race disable_keep_race own_position partition_expire_race row_security_race schema_change_race reserve_race processor_cap_race large_transaction_pages as_of_snapshot $(ISOLATION_PRELOADED)
# The long poll is woken through shared memory: preloaded only.
ISOLATION_PRELOADED = long_poll_wakeup
ISOLATION_OPTS = --inputdir=test --load-extension=changefeed

PG_CXXFLAGS = -std=c++17 -Wno-register -MMD -MP
# Sources include each other's headers by wing: "capture/identity.hpp".
PG_CPPFLAGS += -I$(CURDIR)/extension
EXTRA_CLEAN = $(OBJS:.o=.d) $(DATA_built:=.tmp)
SHLIB_LINK = -lstdc++
# Positions are tagged with OpenSSL's SHA-256 (libssl-dev; PostgreSQL links
# libcrypto already).  `make CHANGEFEED_OPENSSL=` builds the portable one.
CHANGEFEED_OPENSSL ?= yes
ifneq ($(CHANGEFEED_OPENSSL),)
PG_CPPFLAGS += -DCHANGEFEED_OPENSSL_SHA256
SHLIB_LINK += -lcrypto
endif

# Bitcode for JIT would need clang; the extension does not need JIT inlining.
override with_llvm = no

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

extension/changefeed--$(EXTVERSION).sql: $(SQL_BUILD)
	python3 extension/build_sql.py install > $@.tmp && mv $@.tmp $@

extension/changefeed--%--$(EXTVERSION).sql: extension/upgrade/delta/%--$(EXTVERSION).sql $(SQL_BUILD)
	python3 extension/build_sql.py upgrade $< > $@.tmp && mv $@.tmp $@

# Each object depends on every header it includes: the compiler writes those
# lists (-MMD, into extension/**/*.d) and make reads them back, so touching a
# header rebuilds exactly its dependants.  An object built before it had a .d
# file is rebuilt when this Makefile changes.  test/stages/incremental_build.sh checks.
$(OBJS): Makefile
-include $(OBJS:.o=.d)
