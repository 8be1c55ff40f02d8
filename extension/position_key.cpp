// The cluster's position key: the secret that positions are authenticated
// with (position_codec.hpp).  32 random bytes in `changefeed_position.key` in
// the data directory, mode 0600, created on first need and read once per
// backend.  Only the server's OS user can read the file, and through SQL only
// roles that may read data-directory files: superusers, members of
// pg_read_server_files, roles granted EXECUTE on pg_read_binary_file, and
// replication roles (a base backup copies it, as a restored or standby
// cluster needs it).
//
// Plain C frames only: everything here may raise an error, and its longjmp
// would skip C++ destructors.
#include "pg.hpp"
#include "position_codec.hpp"

extern "C" {
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/fd.h"
}

#define POSITION_KEY_FILE "changefeed_position.key"

static uint8 position_key[changefeed::codec::kKeySize];
static bool position_key_loaded = false;

// Reads the key into `key`; false when the file does not exist.
static bool read_position_key(const char *path, uint8 *key) {
    uint8 buf[changefeed::codec::kKeySize + 1];
    int fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
    if (fd < 0) {
        if (errno == ENOENT) return false;
        ereport(ERROR, (errcode_for_file_access(),
                        errmsg("could not open position key file \"%s\": %m", path)));
    }
    ssize_t total = 0;
    for (;;) {
        ssize_t n = read(fd, buf + total, sizeof buf - total);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            ereport(ERROR, (errcode_for_file_access(),
                            errmsg("could not read position key file \"%s\": %m", path)));
        if (n == 0 || (total += n) == (ssize_t)sizeof buf) break;
    }
    CloseTransientFile(fd);
    if (total != (ssize_t)changefeed::codec::kKeySize)
        ereport(ERROR,
                (errcode(ERRCODE_DATA_CORRUPTED),
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
static void create_position_key(const char *path) {
    uint8 key[changefeed::codec::kKeySize];
    char tmp[MAXPGPATH + 32];
    if (!pg_strong_random(key, sizeof key))
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                        errmsg("could not generate a random position key")));
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, MyProcPid);
    (void)unlink(tmp);  // left by a backend of the same pid that crashed here
    int fd = OpenTransientFilePerm(tmp, O_WRONLY | O_CREAT | O_EXCL | PG_BINARY, S_IRUSR | S_IWUSR);
    if (fd < 0)
        ereport(ERROR, (errcode_for_file_access(),
                        errmsg("could not create position key file \"%s\": %m", tmp)));
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
        ereport(ERROR, (errcode_for_file_access(),
                        errmsg("could not write position key file \"%s\": %m", path)));
    }
    fsync_fname(DataDir, true);  // the new directory entry survives a crash
}

const uint8 *changefeed_position_key(void) {
    if (!position_key_loaded) {
        char path[MAXPGPATH];
        snprintf(path, sizeof path, "%s/%s", DataDir, POSITION_KEY_FILE);
        if (!read_position_key(path, position_key)) {
            create_position_key(path);
            if (!read_position_key(path, position_key))
                ereport(ERROR, (errcode_for_file_access(),
                                errmsg("position key file \"%s\" vanished after it was created",
                                       path)));
        }
        position_key_loaded = true;
    }
    return position_key;
}
