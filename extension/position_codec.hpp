// Position codec: pure C++ (no PostgreSQL calls), so it may throw freely.
//
// Text form: "cf1." followed by unpadded base64url of
//   u8 version | u64 system id | u32 database oid | snapshot lo |
//   u8 flags (bit 0: hi present) | [snapshot hi] | i64 last seq | u32 FNV-1a of all before
// where a snapshot is u64 xmin | u64 xmax | u32 nxip | nxip x u64, little endian.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace changefeed::codec {

struct Snapshot {
    uint64_t xmin = 0;
    uint64_t xmax = 0;
    std::vector<uint64_t> xip;  // in-progress transaction ids, ascending
};

struct Position {
    uint64_t system_id = 0;
    uint32_t database = 0;
    Snapshot lo;
    std::optional<Snapshot> hi;
    int64_t last_seq = 0;
};

// Malformed, truncated or tampered text.
struct InvalidPosition : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// Well formed, but taken on another cluster or database.
struct ForeignPosition : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// pg_snapshot text form "xmin:xmax:xip,xip,...".
Snapshot parse_snapshot(std::string_view text);
std::string format_snapshot(const Snapshot &s);

std::string encode(const Position &p);
// Validates everything; the caller's cluster and database must match.
Position decode(std::string_view text, uint64_t system_id, uint32_t database);

uint32_t fnv1a32(std::string_view bytes);

}  // namespace changefeed::codec

// C-callable wrappers that never throw: they return 0 on success, or an
// error kind (1 invalid, 2 foreign, 3 internal) with a message in `err`.
extern "C" {
int changefeed_codec_encode(const char *lo, const char *hi, int64_t last_seq, uint64_t system_id,
                            uint32_t database, char *out, size_t outlen, char *err, size_t errlen);
int changefeed_codec_decode(const char *text, uint64_t system_id, uint32_t database, char *lo,
                            char *hi, size_t snaplen, int64_t *last_seq, int *has_hi, char *err,
                            size_t errlen);
}
