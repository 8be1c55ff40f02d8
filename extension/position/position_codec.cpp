// Position codec (see position_codec.hpp for the format and the MAC).
#include "position/position_codec.hpp"

#include <cstdio>
#include <cstring>
#include <optional>

#ifdef CHANGEFEED_OPENSSL_SHA256
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#endif

// This file throws C++ exceptions, so it must not call PostgreSQL: an
// ereport() here would longjmp over C++ destructors, and an exception must
// never reach PostgreSQL.  Keeping PostgreSQL's headers out enforces that at
// compile time (pg.hpp defines CHANGEFEED_PG_HEADERS; postgres.h, POSTGRES_H).
#if defined(CHANGEFEED_PG_HEADERS) || defined(POSTGRES_H)
#error "position_codec.cpp is pure C++: do not include pg.hpp or PostgreSQL headers here"
#endif

namespace changefeed::codec {
namespace {

constexpr std::string_view kPrefix = "cf2.";
constexpr std::string_view kOutdatedPrefix = "cf1.";
constexpr uint8_t kVersion = 3;
constexpr uint8_t kVersionWithoutHistory = 2;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

// ---- SHA-256 (FIPS 180-4) and HMAC (RFC 2104) ----------------------------

constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#ifdef CHANGEFEED_OPENSSL_SHA256
// OpenSSL's SHA-256 (CPU instructions where there are some): a read tags a
// position per row, and the portable code below was a quarter of its time.
// The low-level calls are deprecated in OpenSSL 3 but need no algorithm
// fetch per hash, and their state is a plain struct that copies.
class Sha256 {
public:
    Sha256() { SHA256_Init(&ctx_); }
    void update(std::string_view data) { SHA256_Update(&ctx_, data.data(), data.size()); }
    std::array<uint8_t, 32> finish() {
        std::array<uint8_t, 32> out;
        SHA256_Final(out.data(), &ctx_);
        return out;
    }

private:
    SHA256_CTX ctx_;
};
#else
uint32_t rotr(uint32_t x, int n) {
    return (x >> n) | (x << (32 - n));
}

class Sha256 {
public:
    void update(std::string_view data) {
        for (char c : data) {
            block_[fill_++] = uint8_t(c);
            if (fill_ == 64) compress();
        }
        length_ += data.size();
    }
    std::array<uint8_t, 32> finish() {
        uint64_t bits = length_ * 8;
        block_[fill_++] = 0x80;
        if (fill_ > 56) {
            while (fill_ < 64) block_[fill_++] = 0;
            compress();
        }
        while (fill_ < 56) block_[fill_++] = 0;
        for (int i = 7; i >= 0; i--) block_[fill_++] = uint8_t(bits >> (8 * i));
        compress();
        std::array<uint8_t, 32> out;
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 4; j++) out[4 * i + j] = uint8_t(h_[i] >> (24 - 8 * j));
        return out;
    }

private:
    void compress() {
        uint32_t w[64];
        for (int i = 0; i < 16; i++)
            w[i] = uint32_t(block_[4 * i]) << 24 | uint32_t(block_[4 * i + 1]) << 16 |
                   uint32_t(block_[4 * i + 2]) << 8 | uint32_t(block_[4 * i + 3]);
        for (int i = 16; i < 64; i++) {
            uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
            uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
        for (int i = 0; i < 64; i++) {
            uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
            uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
            h = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        h_[0] += a;
        h_[1] += b;
        h_[2] += c;
        h_[3] += d;
        h_[4] += e;
        h_[5] += f;
        h_[6] += g;
        h_[7] += h;
        fill_ = 0;
    }

    uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    uint8_t block_[64] = {};
    size_t fill_ = 0;
    uint64_t length_ = 0;
};
#endif

std::string_view as_view(const std::array<uint8_t, 32> &a) {
    return std::string_view(reinterpret_cast<const char *>(a.data()), a.size());
}

// HMAC-SHA256 under one key, with the hash states after the key's inner and
// outer pads computed once: a read tags a position per row, always under the
// cluster's key, and this saves two of the compressions of every tag.
class KeyedMac {
public:
    explicit KeyedMac(const uint8_t *key) {
        std::memcpy(key_, key, kKeySize);
        uint8_t block[64] = {};
        std::memcpy(block, key, kKeySize);  // kKeySize <= 64: the key is its own block
        char ipad[64], opad[64];
        for (int i = 0; i < 64; i++) {
            ipad[i] = char(block[i] ^ 0x36);
            opad[i] = char(block[i] ^ 0x5c);
        }
        inner_.update(std::string_view(ipad, 64));
        outer_.update(std::string_view(opad, 64));
    }
    bool has_key(const uint8_t *key) const { return std::memcmp(key_, key, kKeySize) == 0; }
    std::array<uint8_t, 32> tag(std::string_view message) const {
        Sha256 inner = inner_;
        inner.update(message);
        return tag_of_inner(inner);
    }
    // The inner hash having taken `prefix`: messages that begin with it
    // (the positions of one page) hash it once.
    Sha256 inner_after(std::string_view prefix) const {
        Sha256 inner = inner_;
        inner.update(prefix);
        return inner;
    }
    // The tag of the message the inner hash `inner` has taken.
    std::array<uint8_t, 32> tag_of_inner(Sha256 &inner) const {
        auto inner_hash = inner.finish();
        Sha256 outer = outer_;
        outer.update(as_view(inner_hash));
        return outer.finish();
    }

private:
    uint8_t key_[kKeySize];
    Sha256 inner_, outer_;
};
static_assert(kKeySize <= 64, "an HMAC-SHA256 key of up to one block is used as is");

const KeyedMac &mac_for(const uint8_t *key) {
    static std::optional<KeyedMac> mac;  // a backend is single-threaded
    if (!mac || !mac->has_key(key)) mac.emplace(key);
    return *mac;
}

std::string tag_of(std::string_view body, const uint8_t *key) {
    auto t = mac_for(key).tag(body);
    return std::string(reinterpret_cast<const char *>(t.data()), kTagSize);
}

// Compares without an early exit, so timing does not tell how much matched.
bool same_tag(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    uint8_t diff = 0;
    for (size_t i = 0; i < a.size(); i++) diff |= uint8_t(a[i] ^ b[i]);
    return diff == 0;
}

// ---- base64url ------------------------------------------------------------

size_t base64url_length(size_t bytes) {
    return bytes / 3 * 4 + (bytes % 3 ? bytes % 3 + 1 : 0);
}

// The base64url text of `n` bytes at `in`, base64url_length(n) characters
// into `out`.
void base64url_into(const uint8_t *in, size_t n, char *out) {
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t(in[i]) << 16) | (uint32_t(in[i + 1]) << 8) | in[i + 2];
        for (int s = 18; s >= 0; s -= 6) *out++ = kAlphabet[(v >> s) & 63];
    }
    if (size_t rest = n - i; rest > 0) {
        uint32_t v = uint32_t(in[i]) << 16;
        if (rest == 2) v |= uint32_t(in[i + 1]) << 8;
        *out++ = kAlphabet[(v >> 18) & 63];
        *out++ = kAlphabet[(v >> 12) & 63];
        if (rest == 2) *out++ = kAlphabet[(v >> 6) & 63];
    }
}

std::string base64url(const std::string &in) {
    std::string out(base64url_length(in.size()), '\0');
    base64url_into(reinterpret_cast<const uint8_t *>(in.data()), in.size(), out.data());
    return out;
}

int digit(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
}

// Only the canonical text of some bytes decodes: leftover bits must be zero,
// so that no two texts name the same position.
std::string unbase64url(std::string_view in) {
    if (in.size() % 4 == 1) throw InvalidPosition("position is truncated");
    std::string out;
    out.reserve(in.size() * 3 / 4);
    uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
        int d = digit(c);
        if (d < 0) throw InvalidPosition("position contains characters outside its alphabet");
        acc = ((acc << 6) | uint32_t(d)) & 0xfff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += char((acc >> bits) & 0xff);
        }
    }
    if (bits > 0 && (acc & ((1u << bits) - 1)) != 0) throw InvalidPosition("position is damaged");
    return out;
}

// ---- binary layout --------------------------------------------------------

constexpr size_t kHeaderBytes = 1 + 8 + 4;          // version, system id, database
constexpr size_t kHistoryBytes = 4 + 8;             // timeline, lsn (version 3)
constexpr size_t kSnapshotBytes = 8 + 8 + 4;        // without its xip list
constexpr size_t kTrailerBytes = 1 + 8 + kTagSize;  // flags, last seq, tag

class Writer {
public:
    void u8(uint8_t v) { bytes_ += char(v); }
    void u32(uint32_t v) {
        for (int i = 0; i < 4; i++) bytes_ += char((v >> (8 * i)) & 0xff);
    }
    void u64(uint64_t v) {
        for (int i = 0; i < 8; i++) bytes_ += char((v >> (8 * i)) & 0xff);
    }
    void snapshot(const Snapshot &s) {
        u64(s.xmin);
        u64(s.xmax);
        u32(uint32_t(s.xip.size()));
        for (uint64_t x : s.xip) u64(x);
    }
    std::string &bytes() { return bytes_; }

private:
    std::string bytes_;
};

class Reader {
public:
    explicit Reader(std::string_view b) : b_(b) {}
    uint8_t u8() { return uint8_t(take(1)[0]); }
    uint32_t u32() {
        auto s = take(4);
        uint32_t v = 0;
        for (int i = 3; i >= 0; i--) v = (v << 8) | uint8_t(s[i]);
        return v;
    }
    uint64_t u64() {
        auto s = take(8);
        uint64_t v = 0;
        for (int i = 7; i >= 0; i--) v = (v << 8) | uint8_t(s[i]);
        return v;
    }
    Snapshot snapshot() {
        Snapshot s;
        s.xmin = u64();
        s.xmax = u64();
        uint32_t n = u32();
        // Bounded by what is left, so a damaged count allocates nothing large.
        if (n > (b_.size() - pos_) / 8) throw InvalidPosition("position is truncated");
        s.xip.reserve(n);
        for (uint32_t i = 0; i < n; i++) s.xip.push_back(u64());
        return s;
    }
    size_t pos() const { return pos_; }
    size_t size() const { return b_.size(); }

private:
    std::string_view take(size_t n) {
        if (b_.size() - pos_ < n) throw InvalidPosition("position is truncated");
        auto s = b_.substr(pos_, n);
        pos_ += n;
        return s;
    }
    std::string_view b_;
    size_t pos_ = 0;
};

void check_snapshot(const Snapshot &s, const char *which) {
    if (s.xmin == 0 || s.xmin > s.xmax)
        throw InvalidPosition(std::string("position holds an impossible ") + which + " snapshot");
    uint64_t prev = 0;
    for (uint64_t x : s.xip) {
        if (x < s.xmin || x >= s.xmax || x <= prev)
            throw InvalidPosition(std::string("position holds an impossible ") + which + " snapshot");
        prev = x;
    }
}

uint64_t parse_xid(std::string_view t) {
    if (t.empty() || t.size() > 20) throw std::invalid_argument("bad transaction id");
    uint64_t v = 0;
    for (char c : t) {
        if (c < '0' || c > '9') throw std::invalid_argument("bad transaction id");
        uint64_t next = v * 10 + uint64_t(c - '0');
        if (next / 10 != v) throw std::invalid_argument("bad transaction id");
        v = next;
    }
    return v;
}

}  // namespace

std::array<uint8_t, 32> sha256(std::string_view bytes) {
    Sha256 h;
    h.update(bytes);
    return h.finish();
}

std::array<uint8_t, 32> hmac_sha256(std::string_view key, std::string_view message) {
    uint8_t block[64] = {};
    if (key.size() > 64) {
        auto k = sha256(key);
        std::memcpy(block, k.data(), k.size());
    } else {
        std::memcpy(block, key.data(), key.size());
    }
    char ipad[64], opad[64];
    for (int i = 0; i < 64; i++) {
        ipad[i] = char(block[i] ^ 0x36);
        opad[i] = char(block[i] ^ 0x5c);
    }
    Sha256 inner;
    inner.update(std::string_view(ipad, 64));
    inner.update(message);
    auto inner_hash = inner.finish();
    Sha256 outer;
    outer.update(std::string_view(opad, 64));
    outer.update(as_view(inner_hash));
    return outer.finish();
}

Snapshot parse_snapshot(std::string_view text) {
    Snapshot s;
    auto c1 = text.find(':');
    auto c2 = c1 == std::string_view::npos ? c1 : text.find(':', c1 + 1);
    if (c2 == std::string_view::npos) throw std::invalid_argument("bad snapshot text");
    s.xmin = parse_xid(text.substr(0, c1));
    s.xmax = parse_xid(text.substr(c1 + 1, c2 - c1 - 1));
    auto rest = text.substr(c2 + 1);
    while (!rest.empty()) {
        auto comma = rest.find(',');
        s.xip.push_back(parse_xid(rest.substr(0, comma)));
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    return s;
}

std::string format_snapshot(const Snapshot &s) {
    std::string out = std::to_string(s.xmin) + ":" + std::to_string(s.xmax) + ":";
    for (size_t i = 0; i < s.xip.size(); i++) {
        if (i) out += ',';
        out += std::to_string(s.xip[i]);
    }
    return out;
}

size_t max_text_length(uint64_t max_xip) {
    uint64_t bytes = kHeaderBytes + kHistoryBytes + 2 * (kSnapshotBytes + 8 * max_xip) + kTrailerBytes;
    return kPrefix.size() + base64url_length(size_t(bytes));
}

namespace {

// A position's bytes before its last_seq: version, cluster, database,
// history, snapshots.
std::string head_of(const Position &p) {
    if (p.timeline == 0) throw std::invalid_argument("a position needs its timeline");
    Writer w;
    w.u8(kVersion);
    w.u64(p.system_id);
    w.u32(p.database);
    w.u32(p.timeline);
    w.u64(p.lsn);
    w.snapshot(p.lo);
    w.u8(p.hi ? 1 : 0);
    if (p.hi) w.snapshot(*p.hi);
    return std::move(w.bytes());
}

// The text of the position `head` + last_seq, tagged.
std::string finish(std::string body, int64_t last_seq, const uint8_t *key) {
    for (int i = 0; i < 8; i++) body += char((uint64_t(last_seq) >> (8 * i)) & 0xff);
    body += tag_of(body, key);
    return std::string(kPrefix) + base64url(body);
}

// The positions of one page: one head, a seq and a tag each.  The head goes
// through the MAC's inner hash once, and into base64 once up to its last
// whole group of three bytes, so a row costs its tail alone: the head's last
// bytes, its seq and its tag (a read tags every row it returns).  The text
// is finish()'s, byte for byte.
class PageEncoder {
public:
    PageEncoder(const std::string &head, const uint8_t *key) : mac_(mac_for(key)), inner_(mac_.inner_after(head)) {
        const size_t whole = head.size() - head.size() % 3;
        text_ = std::string(kPrefix) + base64url(head.substr(0, whole));
        rest_ = head.size() - whole;
        std::memcpy(tail_, head.data() + whole, rest_);
        length_ = text_.size() + base64url_length(rest_ + 8 + kTagSize);
    }
    // Every text of the page has this length.
    size_t length() const { return length_; }
    // The text for `seq`, NUL-terminated, into out (length() + 1 bytes).
    void encode(int64_t seq, char *out) {
        uint8_t *tail = tail_ + rest_;
        for (int i = 0; i < 8; i++) tail[i] = uint8_t((uint64_t(seq) >> (8 * i)) & 0xff);
        Sha256 inner = inner_;
        inner.update(std::string_view(reinterpret_cast<const char *>(tail), 8));
        const auto tag = mac_.tag_of_inner(inner);
        std::memcpy(tail + 8, tag.data(), kTagSize);
        std::memcpy(out, text_.data(), text_.size());
        base64url_into(tail_, rest_ + 8 + kTagSize, out + text_.size());
        out[length_] = '\0';
    }

private:
    const KeyedMac &mac_;
    Sha256 inner_;      // after the inner pad and the head
    std::string text_;  // prefix and the base64 of the head's whole groups
    uint8_t tail_[2 + 8 + kTagSize];
    size_t rest_;  // head bytes after its whole groups (0 to 2)
    size_t length_;
};

}  // namespace

std::string encode(const Position &p, const uint8_t *key) {
    return finish(head_of(p), p.last_seq, key);
}

std::vector<std::string> encode_page(const Position &p, const std::vector<int64_t> &seqs, const uint8_t *key) {
    PageEncoder page(head_of(p), key);
    std::vector<std::string> out;
    out.reserve(seqs.size());
    std::string text(page.length() + 1, '\0');
    for (int64_t seq : seqs) {
        page.encode(seq, text.data());
        out.emplace_back(text.data(), page.length());
    }
    return out;
}

Position decode(std::string_view text, const Checks &checks) {
    // 1. Length, before anything is decoded or allocated.
    if (text.size() > checks.max_text)
        throw InvalidPosition("position is " + std::to_string(text.size()) +
                              " characters long, longer than any position this server issues (" +
                              std::to_string(checks.max_text) + ")");
    // 2. Structure.
    if (text.substr(0, kOutdatedPrefix.size()) == kOutdatedPrefix)
        throw OutdatedPosition("position predates authenticated positions");
    if (text.substr(0, kPrefix.size()) != kPrefix) {
        if (text.size() >= 3 && text.substr(0, 2) == "cf") throw InvalidPosition("position has an unknown version");
        throw InvalidPosition("text is not a changefeed position");
    }
    std::string bytes = unbase64url(text.substr(kPrefix.size()));
    if (bytes.size() < kHeaderBytes + kSnapshotBytes + kTrailerBytes) throw InvalidPosition("position is truncated");
    std::string_view body(bytes.data(), bytes.size() - kTagSize);
    std::string_view tag = std::string_view(bytes).substr(body.size());
    Reader r(body);
    uint8_t version = r.u8();
    if (version != kVersion && version != kVersionWithoutHistory)
        throw InvalidPosition("position has an unknown version");
    Position p;
    p.system_id = r.u64();
    p.database = r.u32();
    if (version == kVersion) {
        p.timeline = r.u32();
        p.lsn = r.u64();
    }
    p.lo = r.snapshot();
    uint8_t flags = r.u8();
    if (flags > 1) throw InvalidPosition("position is damaged");
    if (flags & 1) p.hi = r.snapshot();
    p.last_seq = int64_t(r.u64());
    if (r.pos() != r.size()) throw InvalidPosition("position is damaged");
    // 3. Cluster and database: a restored or cloned database keeps getting
    // this answer, not a tag mismatch (its key may differ).
    if (p.system_id != checks.system_id || p.database != checks.database)
        throw ForeignPosition("position was taken on another database cluster or database");
    // 4. The tag.
    if (!same_tag(tag, tag_of(body, checks.key)))
        throw ForgedPosition("position is forged or damaged (authentication failed)");
    // 5. The snapshots.
    check_snapshot(p.lo, "lower");
    if (p.hi) {
        check_snapshot(*p.hi, "upper");
        if (p.hi->xmax < p.lo.xmax || p.hi->xmin < p.lo.xmin)
            throw InvalidPosition("position holds an upper snapshot older than its lower one");
    }
    if (p.last_seq < 0 || (!p.hi && p.last_seq != 0)) throw InvalidPosition("position is damaged");
    if (version == kVersion && p.timeline == 0) throw InvalidPosition("position is damaged");
    if (checks.next_xid != 0 && (p.lo.xmax > checks.next_xid || (p.hi && p.hi->xmax > checks.next_xid)))
        throw FuturePosition("position is newer than this database: restored from an older backup?");
    return p;
}

}  // namespace changefeed::codec

namespace {

using namespace changefeed::codec;

ChangefeedCodecStatus report(const std::exception &e, ChangefeedCodecStatus kind, char *err, size_t errlen) noexcept {
    std::snprintf(err, errlen, "%s", e.what());
    return kind;
}

bool copy_out(const std::string &s, char *out, size_t outlen) noexcept {
    if (s.size() + 1 > outlen) return false;
    std::memcpy(out, s.c_str(), s.size() + 1);
    return true;
}

// The position an encode starts from: where it is encoded and its lower
// snapshot.
Position position_at(uint64_t system_id, uint32_t database, ChangefeedWalPoint at, const char *lo) {
    Position p;
    p.system_id = system_id;
    p.database = database;
    p.timeline = at.timeline;
    p.lsn = at.lsn;
    p.lo = parse_snapshot(lo);
    return p;
}

// Runs an encode: whatever it throws is an internal failure, told in err.
template <class Encode>
ChangefeedCodecStatus encoding(Encode &&encode, char *err, size_t errlen) noexcept {
    try {
        encode();
        return CHANGEFEED_CODEC_OK;
    } catch (const std::exception &e) {
        return report(e, CHANGEFEED_CODEC_INTERNAL, err, errlen);
    } catch (...) {
        std::snprintf(err, errlen, "unexpected failure");
        return CHANGEFEED_CODEC_INTERNAL;
    }
}

}  // namespace

extern "C" ChangefeedCodecStatus changefeed_codec_encode(const char *lo, const char *hi, int64_t last_seq,
                                                         uint64_t system_id, uint32_t database, ChangefeedWalPoint at,
                                                         const uint8_t *key, char *out, size_t outlen, char *err,
                                                         size_t errlen) {
    return encoding(
        [&] {
            Position p = position_at(system_id, database, at, lo);
            if (hi) p.hi = parse_snapshot(hi);
            p.last_seq = hi ? last_seq : 0;
            if (!copy_out(encode(p, key), out, outlen)) throw std::length_error("position buffer too small");
        },
        err, errlen);
}

// Positions (lo, hi, seq) of many rows of one window: the snapshots are
// parsed and laid out once, only the seq and the tag differ.
extern "C" ChangefeedCodecStatus changefeed_codec_encode_page(const char *lo, const char *hi, const int64_t *seqs,
                                                              size_t n, uint64_t system_id, uint32_t database,
                                                              ChangefeedWalPoint at, const uint8_t *key, char *out,
                                                              size_t stride, size_t *length, char *err, size_t errlen) {
    return encoding(
        [&] {
            Position p = position_at(system_id, database, at, lo);
            p.hi = parse_snapshot(hi);
            PageEncoder page(head_of(p), key);
            if (page.length() + 1 > stride) throw std::length_error("position buffer too small");
            for (size_t i = 0; i < n; i++) page.encode(seqs[i], out + i * stride);
            if (length != nullptr) *length = page.length();
        },
        err, errlen);
}

extern "C" ChangefeedCodecStatus changefeed_codec_decode(const char *text, size_t textlen, uint64_t system_id,
                                                         uint32_t database, const uint8_t *key, uint64_t next_xid,
                                                         size_t max_text, char *lo, char *hi, size_t snaplen,
                                                         int64_t *last_seq, int *has_hi, ChangefeedWalPoint *at,
                                                         char *err, size_t errlen) {
    try {
        Checks checks;
        checks.system_id = system_id;
        checks.database = database;
        checks.key = key;
        checks.next_xid = next_xid;
        checks.max_text = max_text;
        Position p = decode(std::string_view(text, textlen), checks);
        if (!copy_out(format_snapshot(p.lo), lo, snaplen) || (p.hi && !copy_out(format_snapshot(*p.hi), hi, snaplen)))
            throw std::length_error("snapshot buffer too small");
        *has_hi = p.hi ? 1 : 0;
        *last_seq = p.last_seq;
        at->timeline = p.timeline;
        at->lsn = p.lsn;
        return CHANGEFEED_CODEC_OK;
    } catch (const OutdatedPosition &e) {
        return report(e, CHANGEFEED_CODEC_OUTDATED, err, errlen);
    } catch (const ForgedPosition &e) {
        return report(e, CHANGEFEED_CODEC_FORGED, err, errlen);
    } catch (const FuturePosition &e) {
        return report(e, CHANGEFEED_CODEC_FUTURE, err, errlen);
    } catch (const InvalidPosition &e) {
        return report(e, CHANGEFEED_CODEC_INVALID, err, errlen);
    } catch (const ForeignPosition &e) {
        return report(e, CHANGEFEED_CODEC_FOREIGN, err, errlen);
    } catch (const std::exception &e) {
        return report(e, CHANGEFEED_CODEC_INTERNAL, err, errlen);
    } catch (...) {
        std::snprintf(err, errlen, "unexpected failure");
        return CHANGEFEED_CODEC_INTERNAL;
    }
}

extern "C" size_t changefeed_codec_max_text(uint64_t max_xip) {
    return max_text_length(max_xip);
}
