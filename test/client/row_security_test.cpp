// Row-level security applied to processors: each tenant's processor, running
// as its own login role, receives exactly the changes of the rows the table's
// policies let that role see (a policy on a role-mapping table, evaluated as
// the processor's role), rows moving between tenants as a delete for the one
// they left and a create for the one they joined, and a policy changed while
// the processors run applies from their next read.  A subscription of a
// tenant's role gets the same share.
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <algorithm>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("rowsecurity", CF_TEST_PORT, true);

namespace {

std::string op_name(changefeed::Operation op) {
    switch (op) {
        case changefeed::Operation::create: return "create";
        case changefeed::Operation::replace: return "replace";
        case changefeed::Operation::delete_: return "delete";
        default: return "clear";
    }
}

// "operation:doc" of every change handled, in the order handled (one range,
// one instance: seq order).
std::vector<std::string> received(const cftest::Recorder& rec) {
    std::vector<std::string> out;
    for (const auto& h : rec.all()) out.push_back(op_name(h.change.operation) + ":" + h.change.doc_id);
    return out;
}

// The images of a change that name a tenant other than `tenant`.
int foreign_images(const cftest::Recorder& rec, const std::string& tenant) {
    int n = 0;
    for (const auto& h : rec.all())
        for (const auto* image : {&h.change.current, &h.change.previous})
            if (!image->is_null() && image->at("tenant").as_string() != tenant.c_str()) ++n;
    return n;
}

bool has(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

changefeed::Processor tenant_processor(const std::string& role, cftest::Recorder& rec) {
    return changefeed::make_processor({cluster().conninfo_as(role), "rs_docs"}, role + "_feed", rec.handler(),
                                      changefeed::AllVersionsOptions(cftest::fast_options(role + "-1")));
}

TEST(RowSecurity, EachTenantsProcessorGetsExactlyItsShare) {
    cftest::create_login_role(cluster(), "rs_a_svc", {"changefeed_processor"});
    cftest::create_login_role(cluster(), "rs_b_svc", {"changefeed_processor"});
    cluster().exec("CREATE TABLE rs_map (role_name name, tenant text);"
                   "INSERT INTO rs_map VALUES ('rs_a_svc', 'a'), ('rs_b_svc', 'b');"
                   "CREATE TABLE rs_docs (id int PRIMARY KEY, tenant text NOT NULL, v text);"
                   "ALTER TABLE rs_docs ENABLE ROW LEVEL SECURITY;"
                   "CREATE POLICY by_map ON rs_docs USING ("
                   "    tenant IN (SELECT m.tenant FROM public.rs_map m WHERE m.role_name = current_user));"
                   "GRANT SELECT ON rs_docs, rs_map TO rs_a_svc, rs_b_svc;"
                   "SELECT changefeed.enable('rs_docs', ranges => 1)");
    cftest::Recorder a_rec, b_rec;
    auto a = tenant_processor("rs_a_svc", a_rec);
    auto b = tenant_processor("rs_b_svc", b_rec);
    a.start();
    b.start();
    ASSERT_TRUE(cftest::wait_running(a, 1));
    ASSERT_TRUE(cftest::wait_running(b, 1));
    cftest::ChangeSink a_sub;
    changefeed::SubscriptionOptions so;
    so.poll_interval = 200ms;
    auto sub = changefeed::subscribe({cluster().conninfo_as("rs_a_svc"), "rs_docs"}, a_sub.callback(), so);

    // The writes, and what each tenant must receive of them, in order.
    std::vector<std::string> want_a, want_b;
    auto write = [&](const std::string& sql, std::vector<std::string> to_a, std::vector<std::string> to_b) {
        cluster().exec(sql);
        want_a.insert(want_a.end(), to_a.begin(), to_a.end());
        want_b.insert(want_b.end(), to_b.begin(), to_b.end());
    };
    write("INSERT INTO rs_docs VALUES (1, 'a', 'x')", {"create:1"}, {});
    write("INSERT INTO rs_docs VALUES (2, 'b', 'x')", {}, {"create:2"});
    write("INSERT INTO rs_docs VALUES (3, 'a', 'x')", {"create:3"}, {});
    write("UPDATE rs_docs SET v = 'y' WHERE id = 1", {"replace:1"}, {});
    write("UPDATE rs_docs SET tenant = 'b' WHERE id = 3", {"delete:3"}, {"create:3"});  // a -> b
    write("UPDATE rs_docs SET tenant = 'a' WHERE id = 2", {"create:2"}, {"delete:2"});  // b -> a
    write("INSERT INTO rs_docs VALUES (4, 'c', 'x')", {}, {});                          // nobody's
    write("DELETE FROM rs_docs WHERE id = 1", {"delete:1"}, {});
    write("UPDATE rs_docs SET v = 'z' WHERE id = 3", {}, {"replace:3"});
    ASSERT_TRUE(cftest::eventually([&] { return a_rec.size() >= want_a.size() && b_rec.size() >= want_b.size(); }));
    EXPECT_EQ(received(a_rec), want_a);
    EXPECT_EQ(received(b_rec), want_b);
    EXPECT_EQ(foreign_images(a_rec, "a"), 0);
    EXPECT_EQ(foreign_images(b_rec, "b"), 0);
    ASSERT_TRUE(cftest::eventually([&] { return a_sub.all().size() >= want_a.size(); }));
    std::vector<std::string> subscribed;
    for (const auto& c : a_sub.all()) {
        subscribed.push_back(op_name(c.operation) + ":" + c.doc_id);
        for (const auto* image : {&c.current, &c.previous})
            if (!image->is_null()) EXPECT_EQ(image->at("tenant").as_string(), "a") << c.doc_id;
    }
    EXPECT_EQ(subscribed, want_a);
    // A move's two sides are two events.
    for (const auto& h : b_rec.all())
        if (h.change.doc_id == "3" && h.change.operation == changefeed::Operation::create)
            EXPECT_EQ(h.change.event_id.substr(h.change.event_id.size() - 7), ".create") << h.change.event_id;

    // A row of a tenant nobody maps is read past; once each processor has
    // read past it (its own marker came after), the policy is widened to it:
    // rows written after reach both, the one before stays behind.
    cluster().exec("INSERT INTO rs_docs VALUES (9, 'shared', 'x')");
    cluster().exec("INSERT INTO rs_docs VALUES (11, 'a', 'marker'), (12, 'b', 'marker')");
    ASSERT_TRUE(cftest::eventually([&] {
        return has(received(a_rec), "create:11") && has(received(b_rec), "create:12");
    }));
    cluster().exec(
        "ALTER POLICY by_map ON rs_docs USING ("
        "    tenant IN (SELECT m.tenant FROM public.rs_map m WHERE m.role_name = current_user) OR tenant = 'shared')");
    cluster().exec("INSERT INTO rs_docs VALUES (10, 'shared', 'x')");
    ASSERT_TRUE(cftest::eventually([&] {
        return has(received(a_rec), "create:10") && has(received(b_rec), "create:10");
    }));
    EXPECT_FALSE(has(received(a_rec), "create:9"));
    EXPECT_FALSE(has(received(b_rec), "create:9"));
    EXPECT_FALSE(has(received(a_rec), "create:12"));
    EXPECT_FALSE(has(received(b_rec), "create:11"));
    a.stop();
    b.stop();
}

}  // namespace
