// Multi-tenancy: a tenant-scoped processor sees only its tenant's
// changes, under a lease set of the tenant's own ("<tenant>/<name>"), with
// partition keys that carry no tenant prefix; a role bound to a tenant sees
// only that tenant whatever it runs.
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <changefeed/bridge.hpp>

#include <boost/json/parse.hpp>

#include <atomic>
#include <set>
#include <thread>

using namespace std::chrono_literals;
using changefeed::errc;
using cftest::cluster;
using cftest::code_of;

CF_CLUSTER_ENVIRONMENT("tenant", CF_TEST_PORT, true);

namespace {

// (tenant, id) of what a recorder got, from the documents themselves.
std::multiset<std::pair<std::string, int>> rows_of(const cftest::Recorder& rec) {
    std::multiset<std::pair<std::string, int>> out;
    for (const auto& h : rec.all())
        out.emplace(std::string(h.change.current.at("tenant").as_string()),
                    static_cast<int>(h.change.current.at("id").as_int64()));
    return out;
}

std::multiset<std::pair<std::string, int>> expected(const std::string& tenant, int n) {
    std::multiset<std::pair<std::string, int>> out;
    for (int id = 1; id <= n; ++id) out.emplace(tenant, id);
    return out;
}

changefeed::Processor as(const std::string& role, const std::string& table, const std::string& name,
                         changefeed::Handler h, const std::string& tenant, const std::string& instance) {
    auto o = cftest::fast_options(instance);
    o.tenant = tenant;
    return changefeed::make_processor(changefeed::Collection(cluster().conninfo_as(role), table),
                                      name, std::move(h), o);
}

void create_tenant_table(const std::string& name) {
    cluster().exec("CREATE TABLE " + name + " (tenant text, id int, v text, PRIMARY KEY (tenant, id));"
                   "SELECT changefeed.enable('" + name + "', ranges => 4, tenant_column => 'tenant');"
                   "GRANT SELECT ON " + name + " TO tn_svc, tn_bound");
}

class Tenants : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        cftest::create_login_role(cluster(), "tn_svc", {"changefeed_processor"});
        cftest::create_login_role(cluster(), "tn_bound", {"changefeed_processor"});
        cluster().exec("SELECT changefeed.bind_tenant('tn_bound', 'a')");
        create_tenant_table("tn_orders");
        cftest::create_table(cluster(), "tn_plain", 2);
        cluster().exec("GRANT SELECT ON tn_plain TO tn_svc, tn_bound");
    }
};

TEST_F(Tenants, EachProcessorSeesExactlyItsShare) {
    cftest::Recorder a, b, all, bound;
    // One processor name for all three: the tenants' lease sets must not collide.
    auto pa = as("tn_svc", "tn_orders", "proj", a.handler(), "a", "a-1");
    auto pb = as("tn_svc", "tn_orders", "proj", b.handler(), "b", "b-1");
    auto pall = as("tn_svc", "tn_orders", "proj", all.handler(), "", "all-1");
    auto pbound = as("tn_bound", "tn_orders", "bound-proj", bound.handler(), "", "bound-1");
    for (auto* p : {&pa, &pb, &pall, &pbound}) p->start();

    // Two tenants' writers at once, several transactions each.
    auto writer = [](std::string tenant, int n) {
        for (int from = 1; from <= n; from += 5)
            cluster().exec("INSERT INTO tn_orders (tenant, id, v) SELECT '" + tenant + "', g, 'x'"
                           " FROM generate_series(" + std::to_string(from) + ", " +
                           std::to_string(std::min(n, from + 4)) + ") g");
    };
    std::thread wa(writer, "a", 40), wb(writer, "b", 25);
    wa.join();
    wb.join();

    ASSERT_TRUE(cftest::eventually([&] {
        return a.size() >= 40 && b.size() >= 25 && all.size() >= 65 && bound.size() >= 40;
    }));
    std::this_thread::sleep_for(500ms);  // room for anything extra to show up
    EXPECT_EQ(rows_of(a), expected("a", 40));
    EXPECT_EQ(rows_of(b), expected("b", 25));
    auto both = expected("a", 40);
    both.merge(expected("b", 25));
    EXPECT_EQ(rows_of(all), both);
    EXPECT_EQ(rows_of(bound), expected("a", 40));  // bound to a: only a, though not scoped

    for (const auto& h : a.all()) {
        EXPECT_EQ(h.change.tenant, "a");
        EXPECT_EQ(h.change.partition_key, std::to_string(h.change.current.at("id").as_int64()));  // no prefix
        EXPECT_EQ(h.context.processor, "proj");  // the name as given
    }
    for (const auto& h : b.all()) EXPECT_EQ(h.change.partition_key.find('/'), std::string::npos);
    for (const auto& h : all.all())  // unscoped: the partition key as stored
        EXPECT_EQ(h.change.partition_key, *h.change.tenant + "/" + std::to_string(h.change.current.at("id").as_int64()));

    // Three lease sets of four ranges, filed under the stored names.
    auto sets = cluster().exec(
        "SELECT processor, count(*) FROM changefeed.leases WHERE table_name = 'tn_orders'::regclass"
        " GROUP BY processor ORDER BY processor");
    std::map<std::string, int> by_name;
    for (const auto& r : sets) by_name[r[0].as<std::string>()] = r[1].as<int>();
    EXPECT_EQ(by_name, (std::map<std::string, int>{{"a/proj", 4}, {"b/proj", 4}, {"bound-proj", 4}, {"proj", 4}}));
    EXPECT_EQ(changefeed::stored_processor_name("proj", "a"), "a/proj");
    for (auto* p : {&pa, &pb, &pall, &pbound}) p->stop();
    // The tenant's processor's lag is asked under its stored name.
    EXPECT_EQ(changefeed::estimate_lag(changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_orders"),
                                       changefeed::stored_processor_name("proj", "a"))
                  .size(),
              4u);
}

TEST_F(Tenants, ABoundRoleIsRefusedOtherTenantsAndCollectionsWithoutTenants) {
    auto other = as("tn_bound", "tn_orders", "other", cftest::noop_handler(), "b", "x-1");
    EXPECT_EQ(code_of([&] { other.start(); }), errc::permission_denied);
    auto plain = as("tn_bound", "tn_plain", "plain", cftest::noop_handler(), "", "x-2");
    EXPECT_EQ(code_of([&] { plain.start(); }), errc::permission_denied);
    // Neither name was filed under the refused role.
    auto filed = cluster().exec("SELECT count(*) FROM changefeed.leases WHERE processor IN ('b/other', 'plain')");
    EXPECT_EQ(filed[0][0].as<int>(), 0);
    // Its own tenant it may run scoped.
    auto own = as("tn_bound", "tn_orders", "own", cftest::noop_handler(), "a", "x-3");
    EXPECT_EQ(code_of([&] { own.start(); }), std::error_code());
    own.stop();
}

TEST_F(Tenants, TheTenantOptionNeedsATenantColumn) {
    auto p = as("tn_svc", "tn_plain", "scoped", cftest::noop_handler(), "a", "y-1");
    EXPECT_EQ(code_of([&] { p.start(); }), errc::invalid_option);
    changefeed::SubscriptionOptions o;
    o.tenant = "a";
    EXPECT_EQ(code_of([&] {
                  changefeed::subscribe(changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_plain"),
                                        [](const changefeed::Change&, const changefeed::Context&) {}, o);
              }),
              errc::invalid_option);
}

TEST_F(Tenants, StartFromBeginningBackfillsOnlyTheTenantsRows) {
    create_tenant_table("tn_backfill");
    cluster().exec("INSERT INTO tn_backfill (tenant, id, v) SELECT t, g, 'old' FROM unnest(ARRAY['a', 'b']) t,"
                   " generate_series(1, 30) g");
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("bf-1");
    o.tenant = "b";
    o.start_from_beginning = true;
    o.max_batch_size = 7;  // pages of mixed tenants, some without a row of b
    auto p = changefeed::make_processor(
        changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_backfill"), "bf", rec.handler(), o);
    p.start();
    cluster().exec("INSERT INTO tn_backfill (tenant, id, v) VALUES ('a', 31, 'new'), ('b', 31, 'new')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.size() >= 31; }));
    std::this_thread::sleep_for(500ms);
    // A row written during the scan may come twice (from the table and the
    // log): a backfill is at least once.  Distinct rows must be b's exactly.
    auto got = rows_of(rec);
    auto want = expected("b", 31);
    EXPECT_EQ(std::set(got.begin(), got.end()), std::set(want.begin(), want.end()));
    for (const auto& h : rec.all()) {
        EXPECT_EQ(h.change.partition_key, std::to_string(h.change.current.at("id").as_int64()));
        EXPECT_EQ(h.change.tenant, "b");
    }
    p.stop();
}

TEST_F(Tenants, ASubscriptionMayBeScopedToATenant) {
    create_tenant_table("tn_sub");
    changefeed::SubscriptionOptions o;
    o.tenant = "b";
    cftest::ChangeSink sink;
    auto sub = changefeed::subscribe(changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_sub"),
                                     sink.callback(), o);
    cluster().exec("INSERT INTO tn_sub (tenant, id, v) VALUES ('a', 1, 'x'), ('b', 1, 'x'), ('b', 2, 'x')");
    ASSERT_TRUE(cftest::eventually([&] { return sink.all().size() >= 2; }));
    std::this_thread::sleep_for(300ms);
    auto seen = sink.all();
    ASSERT_EQ(seen.size(), 2u);
    for (const auto& c : seen) {
        EXPECT_EQ(c.current.at("tenant").as_string(), "b");
        EXPECT_EQ(c.partition_key.find('/'), std::string::npos);
    }
}

// A row that moves from tenant a to tenant b: for a a delete carrying only
// its old image, for b a create without a previous image; no tenant sees the
// other's row, and readers of every tenant see one replace.  The same
// reaches a scoped subscription, a bound role's processor and both envelopes.
TEST_F(Tenants, ARowThatMovesIsADeleteForTheOldTenantAndACreateForTheNew) {
    cluster().exec("CREATE TABLE tn_move (id int PRIMARY KEY, tenant text, v text);"
                   "SELECT changefeed.enable('tn_move', ranges => 4, tenant_column => 'tenant');"
                   "GRANT SELECT ON tn_move TO tn_svc, tn_bound");
    auto all_versions = [](const std::string& role, const std::string& name, cftest::Recorder& rec,
                           const std::string& instance) {
        return changefeed::make_processor(changefeed::Collection(cluster().conninfo_as(role), "tn_move"),
                                          name, rec.handler(),
                                          changefeed::AllVersionsOptions(cftest::fast_options(instance)));
    };
    cftest::Recorder a, b, all, bound;
    auto pa = [&] {
        auto o = changefeed::AllVersionsOptions(cftest::fast_options("mv-a"));
        o.tenant = "a";
        return changefeed::make_processor(
            changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_move"), "audit", a.handler(), changefeed::AllVersionsOptions(o));
    }();
    auto pb = [&] {
        auto o = changefeed::AllVersionsOptions(cftest::fast_options("mv-b"));
        o.tenant = "b";
        return changefeed::make_processor(
            changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_move"), "audit", b.handler(), changefeed::AllVersionsOptions(o));
    }();
    auto pall = all_versions("tn_svc", "audit", all, "mv-all");
    auto pbound = all_versions("tn_bound", "audit-bound", bound, "mv-bound");  // bound to a, not scoped
    changefeed::SubscriptionOptions so;
    so.tenant = "a";
    cftest::ChangeSink sub_a;
    for (auto* p : {&pa, &pb, &pall, &pbound}) p->start();
    auto sub = changefeed::subscribe(changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_move"),
                                     sub_a.callback(), so);

    cluster().exec("INSERT INTO tn_move VALUES (1, 'a', 'secret of a')");
    cluster().exec("UPDATE tn_move SET tenant = 'b', v = 'of b now' WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] {
        return a.size() >= 2 && b.size() >= 1 && all.size() >= 2 && bound.size() >= 2 && sub_a.all().size() >= 2;
    }));
    std::this_thread::sleep_for(500ms);  // room for anything extra to show up

    const auto old_image = boost::json::parse(R"({"id": 1, "tenant": "a", "v": "secret of a"})");
    const auto new_image = boost::json::parse(R"({"id": 1, "tenant": "b", "v": "of b now"})");
    for (auto* rec : {&a, &bound}) {
        auto got = rec->all();
        ASSERT_EQ(got.size(), 2u);
        EXPECT_EQ(got[0].change.operation, changefeed::Operation::create);
        const auto& moved = got[1].change;
        EXPECT_EQ(moved.operation, changefeed::Operation::delete_);
        EXPECT_TRUE(moved.current.is_null());  // never b's row
        EXPECT_EQ(moved.previous, old_image);
        EXPECT_EQ(moved.tenant, "a");
    }
    auto got_b = b.all();
    ASSERT_EQ(got_b.size(), 1u);
    const auto& arrived = got_b[0].change;
    EXPECT_EQ(arrived.operation, changefeed::Operation::create);
    EXPECT_EQ(arrived.current, new_image);
    EXPECT_TRUE(arrived.previous.is_null());  // never a's row
    EXPECT_EQ(arrived.tenant, "b");
    auto got_all = all.all();
    ASSERT_EQ(got_all.size(), 2u);
    EXPECT_EQ(got_all[1].change.operation, changefeed::Operation::replace);
    EXPECT_EQ(got_all[1].change.previous, old_image);
    EXPECT_EQ(got_all[1].change.current, new_image);

    auto seen = sub_a.all();
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[1].operation, changefeed::Operation::delete_);
    EXPECT_TRUE(seen[1].current.is_null());
    EXPECT_EQ(seen[1].previous, old_image);

    // The envelopes: two events with ids of their own, each with its
    // tenant's image only.
    changefeed::MapContext ctx;
    ctx.processor = "audit";
    ctx.source = {"shop", "public.tn_move"};
    auto deb = changefeed::debezium_mapper();
    auto ce = changefeed::cloudevents_mapper();
    const auto got_a = a.all();
    const auto& moved = got_a.at(1).change;
    auto body = [](const changefeed::Envelope& e) { return boost::json::parse(e.body).as_object(); };
    auto d_a = body(deb(moved, ctx).at(0));
    auto d_b = body(deb(arrived, ctx).at(0));
    EXPECT_EQ(d_a.at("op").as_string(), "d");
    EXPECT_EQ(d_a.at("before"), old_image);
    EXPECT_TRUE(d_a.at("after").is_null());
    EXPECT_EQ(d_b.at("op").as_string(), "c");
    EXPECT_TRUE(d_b.at("before").is_null());
    EXPECT_EQ(d_b.at("after"), new_image);
    auto c_a = ce(moved, ctx).at(0), c_b = ce(arrived, ctx).at(0);
    EXPECT_EQ(body(c_a).at("type").as_string(), "changefeed.delete");
    EXPECT_EQ(body(c_b).at("type").as_string(), "changefeed.create");
    EXPECT_NE(c_a.id, c_b.id);  // one stream may hold both: neither is a duplicate of the other
    EXPECT_NE(c_a.id, got_all[1].change.event_id);
    EXPECT_NE(c_b.id, got_all[1].change.event_id);
    for (auto* p : {&pa, &pb, &pall, &pbound}) p->stop();
}

TEST(TenantNames, StoredNamesOfTwoTenantsNeverCollide) {
    EXPECT_EQ(changefeed::stored_processor_name("proj"), "proj");
    EXPECT_EQ(changefeed::stored_processor_name("b/c", "a"), "a/b/c");
    EXPECT_EQ(changefeed::stored_processor_name("c", "a/b"), "a%2Fb/c");
    EXPECT_EQ(changefeed::stored_processor_name("c", "100%"), "100%25/c");
    // The prefix counts towards the server's 200 characters.
    changefeed::ProcessorOptions o;
    o.tenant = std::string(10, 't');
    EXPECT_EQ(code_of([&] {
                  changefeed::make_processor(changefeed::Collection("", "t"), std::string(195, 'p'),
                                             cftest::noop_handler(), o);
              }),
              errc::processor_name_too_long);
}

TEST(TenantNames, TheInMemoryProviderRefusesTheTenantOption) {
    changefeed::InMemoryCollection users;
    changefeed::ProcessorOptions o;
    o.tenant = "a";
    EXPECT_EQ(code_of([&] { changefeed::make_processor(users, "p", cftest::noop_handler(), o); }),
              errc::invalid_option);
}

}  // namespace
