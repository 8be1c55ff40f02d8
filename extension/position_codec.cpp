// Position codec (see position_codec.hpp for the format).
#include "position_codec.hpp"

#include <cstdio>
#include <cstring>

namespace changefeed::codec {
namespace {

constexpr std::string_view kPrefix = "cf1.";
constexpr uint8_t kVersion = 1;
constexpr uint32_t kMaxXip = 1u << 20;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string base64url(const std::string &in) {
    std::string out;
    out.reserve((in.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 3 <= in.size(); i += 3) {
        uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
        for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
    }
    if (size_t rest = in.size() - i; rest > 0) {
        uint32_t v = uint8_t(in[i]) << 16;
        if (rest == 2) v |= uint8_t(in[i + 1]) << 8;
        out += kAlphabet[(v >> 18) & 63];
        out += kAlphabet[(v >> 12) & 63];
        if (rest == 2) out += kAlphabet[(v >> 6) & 63];
    }
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

std::string unbase64url(std::string_view in) {
    if (in.size() % 4 == 1) throw InvalidPosition("position is truncated");
    std::string out;
    out.reserve(in.size() * 3 / 4);
    uint32_t acc = 0;
    int bits = 0;
    for (char c : in) {
        int d = digit(c);
        if (d < 0) throw InvalidPosition("position contains characters outside its alphabet");
        acc = (acc << 6) | uint32_t(d);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out += char((acc >> bits) & 0xff);
        }
    }
    return out;
}

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
        if (n > kMaxXip || n > (b_.size() - pos_) / 8) throw InvalidPosition("position is truncated");
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

uint32_t fnv1a32(std::string_view bytes) {
    uint32_t h = 2166136261u;
    for (char c : bytes) {
        h ^= uint8_t(c);
        h *= 16777619u;
    }
    return h;
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

std::string encode(const Position &p) {
    Writer w;
    w.u8(kVersion);
    w.u64(p.system_id);
    w.u32(p.database);
    w.snapshot(p.lo);
    w.u8(p.hi ? 1 : 0);
    if (p.hi) w.snapshot(*p.hi);
    w.u64(uint64_t(p.last_seq));
    w.u32(fnv1a32(w.bytes()));
    return std::string(kPrefix) + base64url(w.bytes());
}

Position decode(std::string_view text, uint64_t system_id, uint32_t database) {
    if (text.substr(0, kPrefix.size()) != kPrefix) {
        if (text.size() >= 3 && text.substr(0, 2) == "cf")
            throw InvalidPosition("position has an unknown version");
        throw InvalidPosition("text is not a changefeed position");
    }
    std::string bytes = unbase64url(text.substr(kPrefix.size()));
    if (bytes.size() < 4) throw InvalidPosition("position is truncated");
    std::string_view body(bytes.data(), bytes.size() - 4);
    Reader tail(std::string_view(bytes).substr(bytes.size() - 4));
    Reader r(body);
    if (r.size() < 1) throw InvalidPosition("position is truncated");
    uint8_t version = r.u8();
    if (version != kVersion) throw InvalidPosition("position has an unknown version");
    Position p;
    p.system_id = r.u64();
    p.database = r.u32();
    p.lo = r.snapshot();
    uint8_t flags = r.u8();
    if (flags > 1) throw InvalidPosition("position is damaged");
    if (flags & 1) p.hi = r.snapshot();
    p.last_seq = int64_t(r.u64());
    if (r.pos() != r.size() || tail.u32() != fnv1a32(body))
        throw InvalidPosition("position is damaged (checksum mismatch)");
    check_snapshot(p.lo, "lower");
    if (p.hi) {
        check_snapshot(*p.hi, "upper");
        if (p.hi->xmax < p.lo.xmax || p.hi->xmin < p.lo.xmin)
            throw InvalidPosition("position holds an upper snapshot older than its lower one");
    }
    if (p.last_seq < 0 || (!p.hi && p.last_seq != 0)) throw InvalidPosition("position is damaged");
    if (p.system_id != system_id || p.database != database)
        throw ForeignPosition("position was taken on another database cluster or database");
    return p;
}

}  // namespace changefeed::codec

namespace {

using namespace changefeed::codec;

int report(const std::exception &e, int kind, char *err, size_t errlen) noexcept {
    std::snprintf(err, errlen, "%s", e.what());
    return kind;
}

bool copy_out(const std::string &s, char *out, size_t outlen) noexcept {
    if (s.size() + 1 > outlen) return false;
    std::memcpy(out, s.c_str(), s.size() + 1);
    return true;
}

}  // namespace

extern "C" int changefeed_codec_encode(const char *lo, const char *hi, int64_t last_seq,
                                       uint64_t system_id, uint32_t database, char *out,
                                       size_t outlen, char *err, size_t errlen) {
    try {
        Position p;
        p.system_id = system_id;
        p.database = database;
        p.lo = parse_snapshot(lo);
        if (hi) p.hi = parse_snapshot(hi);
        p.last_seq = hi ? last_seq : 0;
        if (!copy_out(encode(p), out, outlen)) throw std::length_error("position buffer too small");
        return 0;
    } catch (const std::exception &e) {
        return report(e, 3, err, errlen);
    } catch (...) {
        std::snprintf(err, errlen, "unexpected failure");
        return 3;
    }
}

extern "C" int changefeed_codec_decode(const char *text, uint64_t system_id, uint32_t database,
                                       char *lo, char *hi, size_t snaplen, int64_t *last_seq,
                                       int *has_hi, char *err, size_t errlen) {
    try {
        Position p = decode(text, system_id, database);
        if (!copy_out(format_snapshot(p.lo), lo, snaplen) ||
            (p.hi && !copy_out(format_snapshot(*p.hi), hi, snaplen)))
            throw std::length_error("snapshot buffer too small");
        *has_hi = p.hi ? 1 : 0;
        *last_seq = p.last_seq;
        return 0;
    } catch (const InvalidPosition &e) {
        return report(e, 1, err, errlen);
    } catch (const ForeignPosition &e) {
        return report(e, 2, err, errlen);
    } catch (const std::exception &e) {
        return report(e, 3, err, errlen);
    } catch (...) {
        std::snprintf(err, errlen, "unexpected failure");
        return 3;
    }
}

extern "C" uint32_t changefeed_range_hash(const char *bytes, size_t len) {
    return changefeed::codec::fnv1a32(std::string_view(bytes, len));
}
