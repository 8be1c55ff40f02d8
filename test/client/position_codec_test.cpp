// The extension's position codec (extension/position/position_codec.cpp) is pure C++:
// its MAC, its order of checks and its bounds are tested here without a
// server.  The SQL side (key file, CF004/CF005, the 44 MB text) is in
// test/sql/positions.sql.
#include "position/position_codec.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace codec = changefeed::codec;

namespace {

std::string hex(const std::array<uint8_t, 32>& a, size_t n = 32) {
    static const char digits[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < n; i++) {
        out += digits[a[i] >> 4];
        out += digits[a[i] & 15];
    }
    return out;
}

const uint8_t kKey[codec::kKeySize] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                       17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
const uint8_t kOtherKey[codec::kKeySize] = {};

codec::Checks checks(const uint8_t* key = kKey, uint64_t next_xid = 1000) {
    codec::Checks c;
    c.system_id = 7301234567890123456ull;
    c.database = 16384;
    c.key = key;
    c.next_xid = next_xid;
    c.max_text = 1 << 20;
    return c;
}

codec::Position sample() {
    codec::Position p;
    p.system_id = 7301234567890123456ull;
    p.database = 16384;
    p.timeline = 2;
    p.lsn = 0x16B3D28;
    p.lo = codec::parse_snapshot("100:120:105,110");
    p.hi = codec::parse_snapshot("115:130:125");
    p.last_seq = 42;
    return p;
}

}  // namespace

TEST(PositionMac, Sha256MatchesFips180Vectors) {
    EXPECT_EQ(hex(codec::sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(hex(codec::sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(hex(codec::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(hex(codec::sha256(std::string(1000000, 'a'))),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(PositionMac, Sha256PadsAtBlockEdges) {
    EXPECT_EQ(hex(codec::sha256(std::string(55, 'a'))),
              "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    EXPECT_EQ(hex(codec::sha256(std::string(56, 'a'))),
              "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    EXPECT_EQ(hex(codec::sha256(std::string(63, 'a'))),
              "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34");
    EXPECT_EQ(hex(codec::sha256(std::string(64, 'a'))),
              "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    EXPECT_EQ(hex(codec::sha256(std::string(119, 'a'))),
              "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb");
    EXPECT_EQ(hex(codec::sha256(std::string(120, 'a'))),
              "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c");
}

TEST(PositionMac, HmacSha256MatchesRfc4231Vectors) {
    EXPECT_EQ(hex(codec::hmac_sha256(std::string(20, '\x0b'), "Hi There")),
              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    EXPECT_EQ(hex(codec::hmac_sha256("Jefe", "what do ya want for nothing?")),
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    EXPECT_EQ(hex(codec::hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))),
              "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    // Truncated to 128 bits, as positions carry it.
    EXPECT_EQ(hex(codec::hmac_sha256(std::string(20, '\x0c'), "Test With Truncation"), 16),
              "a3b6167473100ee06e0c796c2955552b");
    // A key longer than a block is hashed first.
    EXPECT_EQ(hex(codec::hmac_sha256(std::string(131, '\xaa'),
                                     "Test Using Larger Than Block-Size Key - Hash Key First")),
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(PositionCodec, RoundTrips) {
    auto text = codec::encode(sample(), kKey);
    EXPECT_EQ(text.substr(0, 4), "cf2.");
    auto p = codec::decode(text, checks());
    EXPECT_EQ(codec::format_snapshot(p.lo), "100:120:105,110");
    ASSERT_TRUE(p.hi.has_value());
    EXPECT_EQ(codec::format_snapshot(*p.hi), "115:130:125");
    EXPECT_EQ(p.last_seq, 42);
    EXPECT_EQ(p.timeline, 2u);
    EXPECT_EQ(p.lsn, 0x16B3D28u);
}

namespace {
std::string base64url(const std::string& in) {
    const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    uint32_t acc = 0;
    int bits = 0;
    for (unsigned char c : in) {
        acc = (acc << 8) | c;
        bits += 8;
        while (bits >= 6) out += a[(acc >> (bits -= 6)) & 63];
    }
    if (bits > 0) out += a[(acc << (6 - bits)) & 63];
    return out;
}
void put(std::string& s, uint64_t v, int n) {
    for (int i = 0; i < n; i++) s += char((v >> (8 * i)) & 0xff);
}
}  // namespace

TEST(PositionCodec, Version2WithoutHistoryStillDecodes) {
    // The layout of 0.2: no timeline, no WAL position.
    std::string body;
    put(body, 2, 1);
    put(body, 7301234567890123456ull, 8);
    put(body, 16384, 4);
    put(body, 100, 8), put(body, 120, 8), put(body, 1, 4), put(body, 105, 8);
    put(body, 0, 1);
    put(body, 0, 8);
    auto tag = codec::hmac_sha256(std::string(reinterpret_cast<const char*>(kKey), codec::kKeySize), body);
    std::string text = "cf2." + base64url(body + std::string(reinterpret_cast<const char*>(tag.data()), 16));
    auto p = codec::decode(text, checks());
    EXPECT_EQ(p.timeline, 0u);
    EXPECT_EQ(p.lsn, 0u);
    EXPECT_EQ(codec::format_snapshot(p.lo), "100:120:105");
    EXPECT_FALSE(p.hi.has_value());
}

TEST(PositionCodec, HistoryIsAuthenticated) {
    auto p = sample();
    auto text = codec::encode(p, kKey);
    p.timeline = 3;
    EXPECT_NE(codec::encode(p, kKey), text);
    p = sample();
    p.lsn++;
    EXPECT_NE(codec::encode(p, kKey), text);
    // Every position encoded now names its timeline.
    p.timeline = 0;
    EXPECT_THROW(codec::encode(p, kKey), std::invalid_argument);
}

TEST(PositionCodec, APageEncodesAsEachPositionAlone) {
    codec::Position p = sample();
    const std::vector<int64_t> seqs = {1, 42, 9000000000000000000LL};
    const auto page = codec::encode_page(p, seqs, kKey);
    ASSERT_EQ(page.size(), seqs.size());
    for (size_t i = 0; i < seqs.size(); i++) {
        p.last_seq = seqs[i];
        EXPECT_EQ(page[i], codec::encode(p, kKey));
        EXPECT_EQ(codec::decode(page[i], checks()).last_seq, seqs[i]);
    }
}

TEST(PositionCodec, APageEncodesAsEachPositionAloneWhateverTheHeadsLength) {
    // The page encoder hashes and base64-encodes the head once, up to its
    // last whole group of three bytes: heads of every length modulo 3 (each
    // in-progress xid adds 8 bytes), and heads longer than a hash block.
    const std::vector<int64_t> seqs = {0, 1, 255, 256, 65537, INT64_MAX};
    std::set<size_t> remainders;
    for (const char* lo :
         {"100:120:", "100:120:105", "100:120:105,110", "100:120:101,102,103,104,105,106,107,108,109"}) {
        for (const char* hi : {"115:130:", "115:130:125", "115:130:116,117,118"}) {
            codec::Position p = sample();
            p.lo = codec::parse_snapshot(lo);
            p.hi = codec::parse_snapshot(hi);
            const auto page = codec::encode_page(p, seqs, kKey);
            ASSERT_EQ(page.size(), seqs.size());
            for (size_t i = 0; i < seqs.size(); i++) {
                p.last_seq = seqs[i];
                EXPECT_EQ(page[i], codec::encode(p, kKey)) << lo << " " << hi << " seq " << seqs[i];
                EXPECT_EQ(codec::decode(page[i], checks()).last_seq, seqs[i]);
            }
            remainders.insert(p.lo.xip.size() + p.hi->xip.size());
        }
    }
    std::set<size_t> mod3;
    for (size_t n : remainders) mod3.insert(n % 3);
    EXPECT_EQ(mod3.size(), 3u);
}

TEST(PositionCodec, AnotherKeyMakesAnotherTag) {
    EXPECT_NE(codec::encode(sample(), kKey), codec::encode(sample(), kOtherKey));
    EXPECT_THROW(codec::decode(codec::encode(sample(), kOtherKey), checks()), codec::ForgedPosition);
}

TEST(PositionCodec, EveryFlippedBitIsRefused) {
    // Flip each bit of every character's value: foreign where it lands in the
    // cluster or database, refused as invalid (never accepted) elsewhere.
    const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    auto text = codec::encode(sample(), kKey);
    int foreign = 0, forged = 0;
    for (size_t i = 4; i < text.size(); i++) {
        for (int bit = 0; bit < 6; bit++) {
            auto t = text;
            t[i] = alphabet[alphabet.find(t[i]) ^ (1u << bit)];
            try {
                codec::decode(t, checks());
                ADD_FAILURE() << "accepted with character " << i << " bit " << bit << " flipped";
            } catch (const codec::ForeignPosition&) {
                foreign++;
            } catch (const codec::ForgedPosition&) {
                forged++;
            } catch (const codec::InvalidPosition&) {
            }
        }
    }
    EXPECT_GT(foreign, 0);
    EXPECT_GT(forged, 0);
}

TEST(PositionCodec, ForeignIsToldBeforeTheTag) {
    // A restored database or another cluster keeps getting "foreign", whatever its key.
    auto p = sample();
    p.database = 16385;
    EXPECT_THROW(codec::decode(codec::encode(p, kOtherKey), checks()), codec::ForeignPosition);
    p = sample();
    p.system_id++;
    EXPECT_THROW(codec::decode(codec::encode(p, kKey), checks()), codec::ForeignPosition);
}

TEST(PositionCodec, TheTagIsCheckedBeforeTheSnapshots) {
    // An impossible snapshot under a wrong key is a forgery, not "impossible".
    auto p = sample();
    p.lo = codec::parse_snapshot("130:120:");
    EXPECT_THROW(codec::decode(codec::encode(p, kOtherKey), checks()), codec::ForgedPosition);
    try {
        codec::decode(codec::encode(p, kKey), checks());
        FAIL() << "accepted an impossible snapshot";
    } catch (const codec::ForgedPosition&) {
        FAIL() << "an authentic position was called forged";
    } catch (const codec::InvalidPosition& e) {
        EXPECT_NE(std::string(e.what()).find("impossible"), std::string::npos) << e.what();
    }
}

TEST(PositionCodec, APositionFromTheFutureIsRefused) {
    // lo.xmax = 120, hi.xmax = 130: fine up to a next transaction id of 130.
    auto text = codec::encode(sample(), kKey);
    EXPECT_NO_THROW(codec::decode(text, checks(kKey, 130)));
    EXPECT_THROW(codec::decode(text, checks(kKey, 129)), codec::FuturePosition);
    auto p = sample();
    p.hi.reset();
    p.last_seq = 0;
    auto lo_only = codec::encode(p, kKey);
    EXPECT_NO_THROW(codec::decode(lo_only, checks(kKey, 120)));
    EXPECT_THROW(codec::decode(lo_only, checks(kKey, 119)), codec::FuturePosition);
    // 0: not checked (a standby that may lag behind the primary).
    EXPECT_NO_THROW(codec::decode(text, checks(kKey, 0)));
}

TEST(PositionCodec, Cf1IsOutdated) {
    // The old unkeyed layout: version 1 and an FNV-1a checksum.
    EXPECT_THROW(codec::decode("cf1.AZz-Y2ndmwxrBQAAAO4CAAAAAAAA7gIAAAAAAAAAAAAAAAAAAAAAAAAAll6w9w", checks()),
                 codec::OutdatedPosition);
}

TEST(PositionCodec, LengthIsCappedBeforeDecoding) {
    auto c = checks();
    c.max_text = 100;
    // Over the cap: refused by length even though its characters are not even valid.
    try {
        codec::decode("cf2." + std::string(97, '@'), c);
        FAIL();
    } catch (const codec::InvalidPosition& e) {
        EXPECT_NE(std::string(e.what()).find("longer than"), std::string::npos) << e.what();
    }
    try {
        codec::decode("cf2." + std::string(96, '@'), c);
        FAIL();
    } catch (const codec::InvalidPosition& e) {
        EXPECT_NE(std::string(e.what()).find("alphabet"), std::string::npos) << e.what();
    }
    // The cap derived from a snapshot size holds the largest position of that size.
    auto p = sample();
    p.lo = codec::parse_snapshot("1:1000:");
    p.hi = codec::parse_snapshot("1:1000:");
    for (uint64_t x = 1; x <= 50; x++) {
        p.lo.xip.push_back(x);
        p.hi->xip.push_back(x);
    }
    EXPECT_EQ(codec::encode(p, kKey).size(), codec::max_text_length(50));
}

TEST(PositionCodec, OnlyCanonicalTextDecodes) {
    auto p = sample();
    p.hi.reset();
    p.last_seq = 0;
    auto text = codec::encode(p, kKey);  // 86 bytes: the last character has 2 unused bits
    ASSERT_EQ((text.size() - 4) % 4, 3u);
    EXPECT_NO_THROW(codec::decode(text, checks()));
    const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    auto t = text;
    t.back() = alphabet[alphabet.find(t.back()) ^ 1];
    EXPECT_THROW(codec::decode(t, checks()), codec::InvalidPosition);
}
