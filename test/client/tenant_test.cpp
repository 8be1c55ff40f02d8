// Multi-tenancy: a tenant-scoped processor sees only its tenant's
// changes, under a lease set of the tenant's own ("<tenant>/<name>"), with
// partition keys that carry no tenant prefix; a role bound to a tenant sees
// only that tenant whatever it runs.
#include "support/cluster.hpp"
#include "support/markers.hpp"
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

using Rows = std::multiset<std::pair<std::string, int>>;

// (tenant, id) of changes, from the documents themselves (the current image,
// or the previous one of a delete).
Rows rows_of(const std::vector<changefeed::Change>& changes) {
    Rows out;
    for (const auto& c : changes) {
        const auto& doc = c.current.is_null() ? c.previous : c.current;
        out.emplace(std::string(doc.at("tenant").as_string()), static_cast<int>(doc.at("id").as_int64()));
    }
    return out;
}

std::vector<changefeed::Change> changes_of(const cftest::Recorder& rec) {
    std::vector<changefeed::Change> out;
    for (const auto& h : rec.all()) out.push_back(h.change);
    return out;
}

Rows rows_of(const cftest::Recorder& rec) { return rows_of(changes_of(rec)); }

Rows expected(const std::string& tenant, int n) {
    Rows out;
    for (int id = 1; id <= n; ++id) out.emplace(tenant, id);
    return out;
}

Rows operator+(Rows a, const Rows& b) {
    a.insert(b.begin(), b.end());
    return a;
}

// Whether every row of `want` is among `got`.
bool has_all(const Rows& got, const Rows& want) {
    for (const auto& row : want)
        if (!got.count(row)) return false;
    return true;
}

// The changes that are not markers, and the (tenant, id) of those that are.
std::vector<changefeed::Change> without_markers(const std::vector<changefeed::Change>& changes) {
    std::vector<changefeed::Change> out;
    for (const auto& c : changes)
        if (!cftest::is_marker(c)) out.push_back(c);
    return out;
}
Rows markers_of(const std::vector<changefeed::Change>& changes) {
    std::vector<changefeed::Change> marks;
    for (const auto& c : changes)
        if (cftest::is_marker(c)) marks.push_back(c);
    return rows_of(marks);
}

// Checks that nothing more arrives prove it by an event: marker rows
// (tenant, id, 'marker') of `tenant`, ids from `first_id` on, written after
// everything checked, one or more in every range of the tenant table `table`
// (asserted against the log).  A range is read in order, so whatever was
// written into it before (or a redelivery of it) would have come first; a
// consumer that handled its tenants' markers is past it.  A subscription
// reports no metrics, hence rows rather than caught-up reads.  Returns the
// rows written, or none if they missed a range.
Rows write_markers(const std::string& table, const std::string& tenant, int first_id) {
    constexpr int n = 32;  // ample for a handful of ranges
    cluster().exec("INSERT INTO " + table + " (tenant, id, v) SELECT '" + tenant +
                   "', g, 'marker'"
                   " FROM generate_series(" +
                   std::to_string(first_id) + ", " + std::to_string(first_id + n - 1) + ") g");
    const bool every_range = cluster()
                                 .exec("SELECT count(DISTINCT l.range_id) = max(col.ranges) FROM changefeed.log l"
                                       "  JOIN changefeed.collections col ON col.id = l.collection_id"
                                       " WHERE col.table_name = '" +
                                       table +
                                       "'::regclass AND l.current->>'v' = 'marker'"
                                       "   AND l.current->>'tenant' = '" +
                                       tenant +
                                       "'"
                                       "   AND (l.current->>'id')::int BETWEEN " +
                                       std::to_string(first_id) + " AND " + std::to_string(first_id + n - 1))[0][0]
                                 .as<bool>(false);
    if (!every_range) return {};
    Rows out;
    for (int id = first_id; id < first_id + n; ++id) out.emplace(tenant, id);
    return out;
}

changefeed::Processor as(const std::string& role, const std::string& table, const std::string& name,
                         changefeed::Handler h, const std::string& tenant, const std::string& instance) {
    auto o = cftest::fast_options(instance);
    o.tenant = tenant;
    return changefeed::make_processor(changefeed::Collection(cluster().conninfo_as(role), table), name, std::move(h),
                                      o);
}

void create_tenant_table(const std::string& name) {
    cluster().exec("CREATE TABLE " + name +
                   " (tenant text, id int, v text, PRIMARY KEY (tenant, id));"
                   "SELECT changefeed.enable('" +
                   name +
                   "', ranges => 4, tenant_column => 'tenant');"
                   "GRANT SELECT ON " +
                   name + " TO tn_svc, tn_bound");
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
            cluster().exec("INSERT INTO tn_orders (tenant, id, v) SELECT '" + tenant +
                           "', g, 'x'"
                           " FROM generate_series(" +
                           std::to_string(from) + ", " + std::to_string(std::min(n, from + 4)) + ") g");
    };
    std::thread wa(writer, "a", 40), wb(writer, "b", 25);
    wa.join();
    wb.join();

    ASSERT_TRUE(cftest::eventually([&] {
        return a.size() >= 40 && b.size() >= 25 && all.size() >= 65 && bound.size() >= 40;
    }));
    // Each consumer past whatever extra could show up: its tenants' markers handled.
    const auto marks_a = write_markers("tn_orders", "a", 1000), marks_b = write_markers("tn_orders", "b", 1000);
    ASSERT_FALSE(marks_a.empty() || marks_b.empty());
    ASSERT_TRUE(cftest::eventually([&] {
        return has_all(rows_of(a), marks_a) && has_all(rows_of(b), marks_b) &&
               has_all(rows_of(all), marks_a + marks_b) && has_all(rows_of(bound), marks_a);
    }));
    EXPECT_EQ(rows_of(a), expected("a", 40) + marks_a);
    EXPECT_EQ(rows_of(b), expected("b", 25) + marks_b);
    auto both = expected("a", 40);
    both.merge(expected("b", 25));
    EXPECT_EQ(rows_of(all), both + marks_a + marks_b);
    EXPECT_EQ(rows_of(bound), expected("a", 40) + marks_a);  // bound to a: only a, though not scoped

    for (const auto& h : a.all()) {
        EXPECT_EQ(h.change.tenant, "a");
        EXPECT_EQ(h.change.partition_key, std::to_string(h.change.current.at("id").as_int64()));  // no prefix
        EXPECT_EQ(h.context.processor, "proj");                                                   // the name as given
    }
    for (const auto& h : b.all()) EXPECT_EQ(h.change.partition_key.find('/'), std::string::npos);
    for (const auto& h : all.all())  // unscoped: the partition key as stored
        EXPECT_EQ(h.change.partition_key,
                  *h.change.tenant + "/" + std::to_string(h.change.current.at("id").as_int64()));

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
                  changefeed::subscribe(
                      changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_plain"),
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
    auto p = changefeed::make_processor(changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_backfill"), "bf",
                                        rec.handler(), o);
    p.start();
    cluster().exec("INSERT INTO tn_backfill (tenant, id, v) VALUES ('a', 31, 'new'), ('b', 31, 'new')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.size() >= 31; }));
    // Markers of both tenants, written after the scan's start: once b's are
    // handled the scan is over (they come last in key order, or from the log
    // that follows it) and every range of the log is read past the rest.
    const auto marks_a = write_markers("tn_backfill", "a", 1000), marks_b = write_markers("tn_backfill", "b", 1000);
    ASSERT_FALSE(marks_a.empty() || marks_b.empty());
    ASSERT_TRUE(cftest::eventually([&] { return has_all(rows_of(rec), marks_b); }));
    // A row written during the scan may come twice (from the table and the
    // log): a backfill is at least once.  Distinct rows must be b's exactly.
    auto got = rows_of(rec);
    auto want = expected("b", 31) + marks_b;
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
    auto sub = changefeed::subscribe(changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_sub"), sink.callback(),
                                     o);
    cluster().exec("INSERT INTO tn_sub (tenant, id, v) VALUES ('a', 1, 'x'), ('b', 1, 'x'), ('b', 2, 'x')");
    ASSERT_TRUE(cftest::eventually([&] { return sink.all().size() >= 2; }));
    const auto marks_a = write_markers("tn_sub", "a", 1000), marks_b = write_markers("tn_sub", "b", 1000);
    ASSERT_FALSE(marks_a.empty() || marks_b.empty());
    ASSERT_TRUE(cftest::eventually([&] { return has_all(rows_of(sink.all()), marks_b); }));
    const auto all_seen = sink.all();
    EXPECT_EQ(markers_of(all_seen), marks_b);
    auto seen = without_markers(all_seen);
    ASSERT_EQ(seen.size(), 2u);
    for (const auto& c : all_seen) {
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
        return changefeed::make_processor(changefeed::Collection(cluster().conninfo_as(role), "tn_move"), name,
                                          rec.handler(),
                                          changefeed::AllVersionsOptions(cftest::fast_options(instance)));
    };
    cftest::Recorder a, b, all, bound;
    auto pa = [&] {
        auto o = changefeed::AllVersionsOptions(cftest::fast_options("mv-a"));
        o.tenant = "a";
        return changefeed::make_processor(changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_move"), "audit",
                                          a.handler(), changefeed::AllVersionsOptions(o));
    }();
    auto pb = [&] {
        auto o = changefeed::AllVersionsOptions(cftest::fast_options("mv-b"));
        o.tenant = "b";
        return changefeed::make_processor(changefeed::Collection(cluster().conninfo_as("tn_svc"), "tn_move"), "audit",
                                          b.handler(), changefeed::AllVersionsOptions(o));
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
    // Each consumer past whatever extra could show up: its tenants' markers
    // handled (ids of their own per tenant: the key is id alone).
    const auto marks_a = write_markers("tn_move", "a", 1000), marks_b = write_markers("tn_move", "b", 2000);
    ASSERT_FALSE(marks_a.empty() || marks_b.empty());
    ASSERT_TRUE(cftest::eventually([&] {
        return has_all(rows_of(a), marks_a) && has_all(rows_of(bound), marks_a) && has_all(rows_of(b), marks_b) &&
               has_all(rows_of(all), marks_a + marks_b) && has_all(rows_of(sub_a.all()), marks_a);
    }));
    EXPECT_EQ(markers_of(changes_of(a)), marks_a);
    EXPECT_EQ(markers_of(changes_of(bound)), marks_a);
    EXPECT_EQ(markers_of(changes_of(b)), marks_b);
    EXPECT_EQ(markers_of(changes_of(all)), marks_a + marks_b);
    EXPECT_EQ(markers_of(sub_a.all()), marks_a);

    const auto old_image = boost::json::parse(R"({"id": 1, "tenant": "a", "v": "secret of a"})");
    const auto new_image = boost::json::parse(R"({"id": 1, "tenant": "b", "v": "of b now"})");
    for (auto* rec : {&a, &bound}) {
        auto got = without_markers(changes_of(*rec));
        ASSERT_EQ(got.size(), 2u);
        EXPECT_EQ(got[0].operation, changefeed::Operation::create);
        const auto& moved = got[1];
        EXPECT_EQ(moved.operation, changefeed::Operation::delete_);
        EXPECT_TRUE(moved.current.is_null());  // never b's row
        EXPECT_EQ(moved.previous, old_image);
        EXPECT_EQ(moved.tenant, "a");
    }
    auto got_b = without_markers(changes_of(b));
    ASSERT_EQ(got_b.size(), 1u);
    const auto& arrived = got_b[0];
    EXPECT_EQ(arrived.operation, changefeed::Operation::create);
    EXPECT_EQ(arrived.current, new_image);
    EXPECT_TRUE(arrived.previous.is_null());  // never a's row
    EXPECT_EQ(arrived.tenant, "b");
    auto got_all = without_markers(changes_of(all));
    ASSERT_EQ(got_all.size(), 2u);
    EXPECT_EQ(got_all[1].operation, changefeed::Operation::replace);
    EXPECT_EQ(got_all[1].previous, old_image);
    EXPECT_EQ(got_all[1].current, new_image);

    auto seen = without_markers(sub_a.all());
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
    const auto got_a = without_markers(changes_of(a));
    const auto& moved = got_a.at(1);
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
    EXPECT_NE(c_a.id, got_all[1].event_id);
    EXPECT_NE(c_b.id, got_all[1].event_id);
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
