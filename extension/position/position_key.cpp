// The database's position key: the secret that positions are authenticated
// with (position_codec.hpp).  32 random bytes in the one row of
// changefeed.position_key (extension/position/position_key.sql), written by the
// install script: database state, so WAL carries it to every standby and
// base backup, and nothing creates one during recovery.  Read here straight
// from the heap, without SPI or a privilege check, so any caller (a reader
// role, a hot standby session) gets it while no role can SELECT it; cached
// per backend for as long as the table is the same one.
//
// An installation still at 0.2 (the library updated, ALTER EXTENSION UPDATE
// not run yet) has no table: it goes on with the key file of 0.2,
// `changefeed_position.key` in the data directory, which the update takes
// over (extension/upgrade/delta/0.2--0.3.sql).
#include "pg.hpp"
#include "position/position_codec.hpp"
#include "position/position_key.hpp"

extern "C" {
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/genam.h"
#include "access/table.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "storage/fd.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(changefeed_new_position_key);
}

#define POSITION_KEY_FILE "changefeed_position.key"

static uint8 position_key[changefeed::codec::kKeySize];
static Oid position_key_relid = InvalidOid;  // the table the cached key came from
static bool position_key_from_file = false;

// ---- the key file of 0.2 ------------------------------------------------------

// Reads the key into `key`; false when the file does not exist.
static bool read_position_key_file(const char *path, uint8 *key) {
    uint8 buf[changefeed::codec::kKeySize + 1];
    int fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
    if (fd < 0) {
        if (errno == ENOENT) return false;
        ereport(ERROR, (errcode_for_file_access(), errmsg("could not open position key file \"%s\": %m", path)));
    }
    ssize_t total = 0;
    for (;;) {
        ssize_t n = read(fd, buf + total, sizeof buf - total);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            ereport(ERROR, (errcode_for_file_access(), errmsg("could not read position key file \"%s\": %m", path)));
        if (n == 0 || (total += n) == (ssize_t)sizeof buf) break;
    }
    CloseTransientFile(fd);
    if (total != (ssize_t)changefeed::codec::kKeySize)
        ereport(ERROR, (errcode(ERRCODE_DATA_CORRUPTED),
                        errmsg("position key file \"%s\" holds %zd bytes instead of %d", path, total,
                               (int)changefeed::codec::kKeySize),
                        errhint("Restore the file from a backup of this cluster. Removing it makes every "
                                "stored position fail with CF004.")));
    memcpy(key, buf, changefeed::codec::kKeySize);
    explicit_bzero(buf, sizeof buf);
    return true;
}

// Writes a new random key under a name of this backend's own, then links it to
// `path`: the key file appears whole or not at all, and if another backend
// linked first, its key stands (link fails with EEXIST) and ours is dropped.
static void create_position_key_file(const char *path) {
    uint8 key[changefeed::codec::kKeySize];
    char tmp[MAXPGPATH + 32];
    if (!pg_strong_random(key, sizeof key))
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not generate a random position key")));
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, MyProcPid);
    (void)unlink(tmp);  // left by a backend of the same pid that crashed here
    int fd = OpenTransientFilePerm(tmp, O_WRONLY | O_CREAT | O_EXCL | PG_BINARY, S_IRUSR | S_IWUSR);
    if (fd < 0)
        ereport(ERROR, (errcode_for_file_access(), errmsg("could not create position key file \"%s\": %m", tmp)));
    bool ok = write(fd, key, sizeof key) == (ssize_t)sizeof key && pg_fsync(fd) == 0;
    int saved = errno;
    CloseTransientFile(fd);
    explicit_bzero(key, sizeof key);
    if (ok && link(tmp, path) != 0 && errno != EEXIST) {
        ok = false;
        saved = errno;
    }
    (void)unlink(tmp);
    if (!ok) {
        errno = saved;
        ereport(ERROR, (errcode_for_file_access(), errmsg("could not write position key file \"%s\": %m", path)));
    }
    fsync_fname(DataDir, true);  // the new directory entry survives a crash
}

static void load_position_key_file(void) {
    char path[MAXPGPATH];
    snprintf(path, sizeof path, "%s/%s", DataDir, POSITION_KEY_FILE);
    if (read_position_key_file(path, position_key)) return;
    // A file made here would differ from the primary's: the standby's
    // positions would fail there, and the primary's here.
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE), errmsg("this standby has no position key"),
                        errdetail("The changefeed installation of this database predates version 0.3, whose "
                                  "position key is database state that standbys receive."),
                        errhint("Run ALTER EXTENSION changefeed UPDATE on the primary.")));
    create_position_key_file(path);
    if (!read_position_key_file(path, position_key))
        ereport(ERROR,
                (errcode_for_file_access(), errmsg("position key file \"%s\" vanished after it was created", path)));
}

// ---- changefeed.position_key ------------------------------------------------

// The key of the table's one row, read in the active snapshot (a statement's)
// or else the catalog's.
static void load_position_key_table(Oid relid) {
    Relation rel = table_open(relid, AccessShareLock);
    AttrNumber att = get_attnum(relid, "key");
    if (att == InvalidAttrNumber)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_COLUMN), errmsg("changefeed.position_key has no column \"key\"")));
    Snapshot snapshot = ActiveSnapshotSet() ? GetActiveSnapshot() : NULL;  // NULL: the catalog snapshot
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snapshot, 0, NULL);
    int rows = 0;
    bool valid = false;
    HeapTuple tuple;
    while (HeapTupleIsValid(tuple = systable_getnext(scan))) {
        rows++;
        bool isnull;
        Datum d = heap_getattr(tuple, att, RelationGetDescr(rel), &isnull);
        if (isnull) continue;
        bytea *b = DatumGetByteaPP(d);
        if (VARSIZE_ANY_EXHDR(b) != changefeed::codec::kKeySize) continue;
        memcpy(position_key, VARDATA_ANY(b), changefeed::codec::kKeySize);
        valid = true;
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    if (rows != 1 || !valid)
        ereport(ERROR,
                (errcode(ERRCODE_DATA_CORRUPTED),
                 errmsg("changefeed.position_key holds %d rows instead of one key of %d bytes", rows,
                        (int)changefeed::codec::kKeySize),
                 errdetail("Positions are authenticated with the key the extension's install script stored there."),
                 errhint("Restore the row from a backup of this database; a new key makes every stored position "
                         "fail with CF004.")));
}

const uint8 *changefeed_position_key(void) {
    // The table is looked up each time (syscache): a dropped and re-created
    // extension has a new table and a new key.
    Oid ns = get_namespace_oid("changefeed", true);
    Oid relid = OidIsValid(ns) ? get_relname_relid("position_key", ns) : InvalidOid;
    if (!OidIsValid(relid)) {
        if (!OidIsValid(ns))
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_SCHEMA), errmsg("schema changefeed is missing"),
                            errhint("Run CREATE EXTENSION changefeed in this database.")));
        if (!position_key_from_file) {
            load_position_key_file();
            position_key_from_file = true;
            position_key_relid = InvalidOid;
        }
        return position_key;
    }
    if (relid != position_key_relid) {
        position_key_relid = InvalidOid;
        position_key_from_file = false;
        load_position_key_table(relid);
        position_key_relid = relid;
    }
    return position_key;
}

extern "C" {

// changefeed._new_position_key() -> bytea: 32 bytes from the strong random
// source, for the install script.
Datum changefeed_new_position_key(PG_FUNCTION_ARGS) {
    bytea *out = (bytea *)palloc(VARHDRSZ + changefeed::codec::kKeySize);
    SET_VARSIZE(out, VARHDRSZ + changefeed::codec::kKeySize);
    if (!pg_strong_random(VARDATA(out), changefeed::codec::kKeySize))
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("could not generate a random position key")));
    PG_RETURN_BYTEA_P(out);
}

}  // extern "C"
