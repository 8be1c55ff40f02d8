// Numbers as PostgreSQL stored them: a numeric with more digits than a double
// holds, a numeric's trailing zeros and a bigint beyond 2^53 arrive exactly in
// the documents' text (Change::current_json, previous_json) and through
// exact_numbers(), on both feeds and on a subscription, and go out exactly in
// the bridge's envelopes.  (The CLI's formats: cli_test.)
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <boost/json.hpp>

using cftest::cluster;
namespace json = boost::json;

CF_CLUSTER_ENVIRONMENT("exact", CF_TEST_PORT, true);

namespace {

const std::string kMoney = "12345678901234567.89";
const std::string kCents = "0.10";
const std::string kBig = "9007199254740993";                 // 2^53 + 1: the first integer a double cannot hold
const std::string kHuge = "123456789012345678901234567890";  // beyond 64 bits

std::string exact_table(const std::string& prefix) {
    const std::string table = cftest::test_table(prefix);
    cluster().exec("CREATE TABLE " + table +
                   " (id int PRIMARY KEY, amount numeric(30,2), cents numeric, big bigint, huge numeric);"
                   "SELECT changefeed.enable('" +
                   table + "', ranges => 2, keep_previous => true)");
    return table;
}

std::string insert_sql(const std::string& table, int id) {
    return "INSERT INTO " + table + " VALUES (" + std::to_string(id) + ", " + kMoney + ", " + kCents + ", " + kBig +
           ", " + kHuge + ")";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The document's text and its exact parse carry every digit.
void expect_exact(const std::string& text) {
    ASSERT_FALSE(text.empty());
    EXPECT_TRUE(contains(text, "\"amount\": " + kMoney)) << text;
    EXPECT_TRUE(contains(text, "\"cents\": " + kCents)) << text;
    EXPECT_TRUE(contains(text, "\"big\": " + kBig)) << text;
    EXPECT_TRUE(contains(text, "\"huge\": " + kHuge)) << text;
    const auto doc = changefeed::exact_numbers(text);
    EXPECT_EQ(doc.at("amount").as_string(), kMoney);
    EXPECT_EQ(doc.at("cents").as_string(), kCents);
    EXPECT_EQ(doc.at("big").as_int64(), 9007199254740993LL);
    EXPECT_EQ(doc.at("huge").as_string(), kHuge);
    EXPECT_EQ(doc.at("id").kind(), json::kind::int64);
}

TEST(ExactValues, ExactNumbersQuotesWhatADoubleWouldChangeAndNothingElse) {
    const auto v = changefeed::exact_numbers(
        R"({"a": -0.5, "b": 1e400, "c": -9223372036854775808, "d": 18446744073709551615,)"
        R"( "e": 18446744073709551616, "s": "12.30 \" 4.5", "n": [1, 2.50, true, null], "k 1.5": -7})");
    EXPECT_EQ(v.at("a").as_string(), "-0.5");
    EXPECT_EQ(v.at("b").as_string(), "1e400");
    EXPECT_EQ(v.at("c").as_int64(), INT64_MIN);
    EXPECT_EQ(v.at("d").as_uint64(), UINT64_MAX);
    EXPECT_EQ(v.at("e").as_string(), "18446744073709551616");
    EXPECT_EQ(v.at("s").as_string(), "12.30 \" 4.5");  // strings untouched
    EXPECT_EQ(v.at("n").as_array()[1].as_string(), "2.50");
    EXPECT_EQ(v.at("n").as_array()[0].as_int64(), 1);
    EXPECT_TRUE(v.at("n").as_array()[2].as_bool());
    EXPECT_EQ(v.at("k 1.5").as_int64(), -7);
    EXPECT_THROW(changefeed::exact_numbers("{\"a\": 1"), boost::system::system_error);
}

TEST(ExactValues, BothFeedsCarryTheDigitsAsPostgresqlStoredThem) {
    const std::string table = exact_table("ex_feeds");
    cftest::Recorder all, latest;
    auto a = changefeed::make_processor({cluster().conninfo(), table}, "audit", all.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("one")));
    auto l = changefeed::make_processor({cluster().conninfo(), table}, "proj", latest.handler(),
                                        changefeed::LatestVersionOptions(cftest::fast_options("one")));
    a.start();
    l.start();
    ASSERT_TRUE(cftest::wait_running(a, 2));
    ASSERT_TRUE(cftest::wait_running(l, 2));
    cluster().exec(insert_sql(table, 1));
    cluster().exec("UPDATE " + table + " SET cents = 0.20 WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] { return all.of("1").size() == 2; }));
    ASSERT_TRUE(cftest::eventually([&] {
        const auto got = latest.of("1");
        return !got.empty() && contains(got.back().current_json, "0.20");
    }));
    expect_exact(all.of("1")[0].current_json);
    EXPECT_TRUE(all.of("1")[0].previous_json.empty());
    expect_exact(all.of("1")[1].previous_json);
    EXPECT_TRUE(contains(all.of("1")[1].current_json, "\"cents\": 0.20"));
    EXPECT_TRUE(contains(latest.of("1").back().current_json, "\"amount\": " + kMoney));
    // The parsed document keeps what a 64-bit integer holds.
    EXPECT_EQ(all.of("1")[0].current.at("big").as_int64(), 9007199254740993LL);
}

TEST(ExactValues, SubscriptionsCarryTheDigits) {
    const std::string table = exact_table("ex_sub");
    cftest::ChangeSink sink;
    changefeed::SubscriptionOptions o;
    o.poll_interval = std::chrono::milliseconds(20);
    auto sub = changefeed::subscribe({cluster().conninfo(), table}, sink.callback(), o);
    cluster().exec(insert_sql(table, 2));
    ASSERT_TRUE(cftest::eventually([&] { return sink.has("2"); }));
    expect_exact(sink.all().front().current_json);
}

TEST(ExactValues, BridgeEnvelopesCarryTheDigits) {
    const std::string table = exact_table("ex_bridge");
    cftest::Recorder all;
    auto a = changefeed::make_processor({cluster().conninfo(), table}, "audit", all.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("one")));
    a.start();
    ASSERT_TRUE(cftest::wait_running(a, 2));
    cluster().exec(insert_sql(table, 3));
    cluster().exec("DELETE FROM " + table + " WHERE id = 3");
    ASSERT_TRUE(cftest::eventually([&] { return all.of("3").size() == 2; }));
    changefeed::MapContext ctx;
    ctx.source = {"postgres", "public." + table};
    for (const auto& c : all.of("3")) {
        for (auto mapper : {changefeed::cloudevents_mapper(), changefeed::debezium_mapper()}) {
            const auto envelopes = mapper(c, ctx);
            ASSERT_EQ(envelopes.size(), 1u);
            const std::string& body = envelopes[0].body;
            EXPECT_TRUE(contains(body, "\"amount\": " + kMoney)) << body;
            EXPECT_TRUE(contains(body, "\"cents\": " + kCents)) << body;
            EXPECT_TRUE(contains(body, "\"huge\": " + kHuge)) << body;
            const auto parsed = json::parse(body);  // still one JSON document
            EXPECT_TRUE(parsed.is_object());
            EXPECT_FALSE(contains(body, "changefeed:current")) << body;
            EXPECT_FALSE(contains(body, "changefeed:previous")) << body;
        }
    }
}

}  // namespace
