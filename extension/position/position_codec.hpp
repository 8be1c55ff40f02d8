// Position codec: pure C++ (no PostgreSQL calls), so it may throw freely.
//
// Text form: "cf2." followed by unpadded, canonical base64url of
//   u8 version (3) | u64 system id | u32 database oid | u32 timeline |
//   u64 wal lsn | snapshot lo | u8 flags (bit 0: hi present) | [snapshot hi] |
//   i64 last seq | 16-byte tag
// where a snapshot is u64 xmin | u64 xmax | u32 nxip | nxip x u64, little
// endian, and the tag is HMAC-SHA256 (RFC 2104, FIPS 180-4) of every byte
// before it under the database's 32-byte position key, truncated to 16 bytes.
//
// Timeline and LSN say where in the server's WAL history the position was
// encoded (extension/position/position_history.cpp checks a decoded one against the
// reading server's history).  Version 2 (0.2, and 0.3 before the history)
// has neither; it is still decoded, with timeline 0.
//
// Why HMAC-SHA256 implemented here rather than PostgreSQL's pg_hmac_*: the
// codec stays one pure call (parse, authenticate, check) with no PostgreSQL
// call between its steps that could raise an error across C++ frames, and the
// same code is tested outside the server against RFC 4231's vectors and, in
// the regression tests, against the server's own sha256().  A 16-byte tag
// leaves 2^-128 per forgery attempt; only the key's holder can mint one.
//
// "cf1." positions (an unkeyed FNV-1a checksum: anyone could recompute them)
// are refused as outdated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace changefeed::codec {

constexpr size_t kKeySize = 32;
constexpr size_t kTagSize = 16;

struct Snapshot {
    uint64_t xmin = 0;
    uint64_t xmax = 0;
    std::vector<uint64_t> xip;  // in-progress transaction ids, ascending
};

struct Position {
    uint64_t system_id = 0;
    uint32_t database = 0;
    uint32_t timeline = 0;  // 0: a version 2 position, which has no history
    uint64_t lsn = 0;
    Snapshot lo;
    std::optional<Snapshot> hi;
    int64_t last_seq = 0;
};

// What the decoder checks a position against: the caller's cluster.
struct Checks {
    uint64_t system_id = 0;
    uint32_t database = 0;
    const uint8_t *key = nullptr;  // kKeySize bytes
    uint64_t next_xid = 0;         // no snapshot xmax may exceed it; 0 = not checked
    size_t max_text = 0;           // longer text is refused before decoding
};

// Malformed, truncated or damaged text.
struct InvalidPosition : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// A "cf1." position, issued before positions were authenticated.
struct OutdatedPosition : InvalidPosition {
    using InvalidPosition::InvalidPosition;
};
// Well formed, but its tag does not match: forged or damaged.
struct ForgedPosition : InvalidPosition {
    using InvalidPosition::InvalidPosition;
};
// Authentic, but newer than the database: restored from an older backup?
struct FuturePosition : InvalidPosition {
    using InvalidPosition::InvalidPosition;
};
// Well formed, but taken on another cluster or database.
struct ForeignPosition : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// pg_snapshot text form "xmin:xmax:xip,xip,...".
Snapshot parse_snapshot(std::string_view text);
std::string format_snapshot(const Snapshot &s);

// The longest text of a position whose snapshots hold at most `max_xip`
// in-progress transactions each.
size_t max_text_length(uint64_t max_xip);

std::string encode(const Position &p, const uint8_t *key);
// encode() of `p` with each of `seqs` as its last_seq; the snapshots are laid
// out once.
std::vector<std::string> encode_page(const Position &p, const std::vector<int64_t> &seqs, const uint8_t *key);
// Checks, in order: length, structure, cluster and database (ForeignPosition),
// the tag (ForgedPosition), then the snapshots (InvalidPosition, FuturePosition).
Position decode(std::string_view text, const Checks &checks);

std::array<uint8_t, 32> sha256(std::string_view bytes);
std::array<uint8_t, 32> hmac_sha256(std::string_view key, std::string_view message);

}  // namespace changefeed::codec

// C-callable wrappers that never throw: they return CHANGEFEED_CODEC_OK, or
// one of the error kinds below with a message in `err`.
extern "C" {
typedef enum ChangefeedCodecStatus {
    CHANGEFEED_CODEC_OK = 0,
    CHANGEFEED_CODEC_INVALID = 1,   // CF004
    CHANGEFEED_CODEC_FOREIGN = 2,   // CF005
    CHANGEFEED_CODEC_INTERNAL = 3,  // a bug or a buffer too small
    CHANGEFEED_CODEC_OUTDATED = 4,  // CF004, a cf1 position
    CHANGEFEED_CODEC_FORGED = 5,    // CF004, tag mismatch
    CHANGEFEED_CODEC_FUTURE = 6,    // CF004, newer than the database
} ChangefeedCodecStatus;
// Where in the WAL history a position is encoded (position_history.cpp).
typedef struct ChangefeedWalPoint {
    uint32_t timeline;
    uint64_t lsn;
} ChangefeedWalPoint;
ChangefeedCodecStatus changefeed_codec_encode(const char *lo, const char *hi, int64_t last_seq, uint64_t system_id,
                                              uint32_t database, ChangefeedWalPoint at, const uint8_t *key, char *out,
                                              size_t outlen, char *err, size_t errlen);
// Positions (lo, hi, seqs[i]) for i < n, each NUL-terminated at out + i * stride;
// `length` (if not null) receives their length, the same for all.
ChangefeedCodecStatus changefeed_codec_encode_page(const char *lo, const char *hi, const int64_t *seqs, size_t n,
                                                   uint64_t system_id, uint32_t database, ChangefeedWalPoint at,
                                                   const uint8_t *key, char *out, size_t stride, size_t *length,
                                                   char *err, size_t errlen);
// `at` receives the position's timeline and LSN (timeline 0: a version 2 position).
ChangefeedCodecStatus changefeed_codec_decode(const char *text, size_t textlen, uint64_t system_id, uint32_t database,
                                              const uint8_t *key, uint64_t next_xid, size_t max_text, char *lo,
                                              char *hi, size_t snaplen, int64_t *last_seq, int *has_hi,
                                              ChangefeedWalPoint *at, char *err, size_t errlen);
size_t changefeed_codec_max_text(uint64_t max_xip);
}
