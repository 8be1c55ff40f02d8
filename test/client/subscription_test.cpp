// Subscriptions: hot, filtered in the database, per document, whole
// transactions after commit, other processes' writes, many at once, sharing
// one read per filter.
#include "subscribe/subscription_hub.hpp"
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <boost/json/serialize.hpp>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

using namespace std::chrono_literals;
using changefeed::Operation;
using changefeed::Change;
using changefeed::field;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("subscription", CF_TEST_PORT, true);

namespace {

changefeed::Collection coll(const std::string& table) { return {cluster().conninfo(), table}; }

changefeed::SubscriptionOptions fast(std::optional<changefeed::Predicate> filter = std::nullopt) {
    changefeed::SubscriptionOptions o;
    o.filter = std::move(filter);
    o.poll_interval = 200ms;
    return o;
}

// schema_changes: one schema change per migration (not one per range), in
// order with the data; without it none.
TEST(Subscription, SchemaChangesOncePerMigrationInOrder) {
    cftest::create_table(cluster(), "sub_schema", 4);
    cftest::ChangeSink sink, plain;
    auto o = fast();
    o.schema_changes = true;
    auto sub = changefeed::subscribe(coll("sub_schema"), sink.callback(), o);
    auto sub_plain = changefeed::subscribe(coll("sub_schema"), plain.callback(), fast());
    cluster().exec("INSERT INTO sub_schema (id, v) VALUES (1, 'a')");
    cluster().exec("ALTER TABLE sub_schema ADD COLUMN note text");
    cluster().exec("INSERT INTO sub_schema (id, v, note) VALUES (2, 'b', 'n')");
    ASSERT_TRUE(cftest::eventually([&] { return sink.has("2") && plain.has("2"); }));
    const auto got = sink.all();
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[0].operation, Operation::create);
    EXPECT_EQ(got[1].operation, Operation::schema);
    EXPECT_TRUE(got[1].doc_id.empty());
    EXPECT_EQ(got[1].current.at("added").as_array().at(0).at("name").as_string(), "note");
    EXPECT_EQ(got[2].operation, Operation::create);
    EXPECT_EQ(got[2].current.at("note").as_string(), "n");
    EXPECT_EQ(plain.all().size(), 2u);
}

// wait_until_caught_up: every change committed before it was handed over,
// a slow callback's included; in pull mode, taken by next().  The poll is
// long: only the wait's own wake-up makes it return in time.
TEST(Subscription, WaitUntilCaughtUpMeansEveryEarlierChangeWasHandled) {
    cftest::create_table(cluster(), "sub_wait", 4);
    std::atomic<int> handled{0};
    auto o = fast();
    o.poll_interval = 60s;
    auto sub = changefeed::subscribe(
        coll("sub_wait"),
        [&](const changefeed::Change&, const changefeed::Context&) {
            std::this_thread::sleep_for(20ms);
            ++handled;
        },
        o);
    auto pull = changefeed::subscribe(coll("sub_wait"), o);
    cluster().exec("INSERT INTO sub_wait (id, v) SELECT g, 'x' FROM generate_series(1, 10) g");
    sub.wait_until_caught_up(30s);
    EXPECT_EQ(handled.load(), 10);
    // Pull mode: read but not taken is not handed over.
    EXPECT_EQ(cftest::code_of([&] { pull.wait_until_caught_up(300ms); }), changefeed::errc::wait_timed_out);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(pull.next().has_value());
    pull.wait_until_caught_up(30s);
    EXPECT_EQ(cftest::code_of([&] { sub.wait_for("cf2.garbage", 0ms); }), changefeed::errc::malformed_position);
}

TEST(Subscription, IsHotAndCarriesEveryOperation) {
    cftest::create_table(cluster(), "sub_types", 4);
    cluster().exec("INSERT INTO sub_types (id, v) VALUES (1, 'before')");
    cftest::ChangeSink sink;
    auto sub = changefeed::subscribe(coll("sub_types"), sink.callback(), fast());
    cluster().exec("INSERT INTO sub_types (id, v) VALUES (2, 'a')");
    cluster().exec("UPDATE sub_types SET v = 'b' WHERE id = 2");  // one column: the whole row arrives
    cluster().exec("DELETE FROM sub_types WHERE id = 2");
    cluster().exec("INSERT INTO sub_types (id, v) VALUES (3, 'c')");
    cluster().exec("TRUNCATE sub_types");
    cluster().exec("INSERT INTO sub_types (id, v) VALUES (4, 'after')");
    ASSERT_TRUE(cftest::eventually([&] { return sink.has("4"); }));
    auto got = sink.all();
    ASSERT_EQ(got.size(), 6u);  // nothing from before the subscription; one Cleared per TRUNCATE
    EXPECT_EQ(got[0].operation, Operation::create);
    EXPECT_EQ(got[0].doc_id, "2");
    EXPECT_EQ(got[0].current.at("v").as_string(), "a");
    EXPECT_EQ(got[1].operation, Operation::replace);
    EXPECT_EQ(got[1].current.at("v").as_string(), "b");
    EXPECT_TRUE(got[1].current.as_object().contains("deleted"));  // untouched columns too
    EXPECT_EQ(got[1].previous.at("v").as_string(), "a");
    EXPECT_EQ(got[2].operation, Operation::delete_);
    EXPECT_TRUE(got[2].current.is_null());
    EXPECT_EQ(got[2].previous.at("v").as_string(), "b");
    EXPECT_EQ(got[3].operation, Operation::create);
    EXPECT_EQ(got[4].operation, Operation::clear);
    EXPECT_TRUE(got[4].doc_id.empty());
    EXPECT_TRUE(got[4].current.is_null());
    EXPECT_EQ(got[5].doc_id, "4");
    EXPECT_TRUE(sub.active());
}

TEST(Subscription, WatchesOneDocumentAndPassesClears) {
    cftest::create_table(cluster(), "sub_watch", 4);
    changefeed::SubscriptionOptions o = fast();
    auto sub = changefeed::watch(coll("sub_watch"), "7", o);
    cluster().exec("INSERT INTO sub_watch (id, v) SELECT g, 'x' FROM generate_series(1, 10) g");
    cluster().exec("UPDATE sub_watch SET v = 'y' WHERE id IN (6, 7, 8)");
    cluster().exec("TRUNCATE sub_watch");
    std::vector<Change> got;
    for (int i = 0; i < 3; ++i) {
        auto c = sub.next();
        ASSERT_TRUE(c);
        got.push_back(*c);
    }
    EXPECT_EQ(got[0].operation, Operation::create);
    EXPECT_EQ(got[0].doc_id, "7");
    EXPECT_EQ(got[1].operation, Operation::replace);
    EXPECT_EQ(got[1].doc_id, "7");
    EXPECT_EQ(got[2].operation, Operation::clear);
    EXPECT_FALSE(sub.try_next());
}

// Every filter shares the sentinel clause, so that the sentinel's arrival
// proves everything written before it was read.
TEST(Subscription, EachFilterOperatorIsAppliedInTheDatabase) {
    cluster().exec("CREATE TABLE sub_filter (id int PRIMARY KEY, doc jsonb);"
                   "SELECT changefeed.enable('sub_filter', ranges => 4)");
    const std::string tricky = "O'Brien \"q\" $v0 \\ ') || true || (' --";
    auto sentinel = field("doc", "sentinel").exists();
    struct Case {
        const char* name;
        changefeed::Predicate filter;
        std::vector<std::string> expected;
    };
    std::vector<Case> cases = {
        {"eq", field("doc", "status") == "open", {"1", "3"}},
        {"ne", field("doc", "status") != "open", {"2", "4"}},
        {"lt", field("doc", "n") < 3, {"1", "2"}},
        {"le", field("doc", "n") <= 3, {"1", "2", "3"}},
        {"gt", field("doc", "n") > 3, {"4", "5"}},
        {"ge", field("doc", "n") >= 3, {"3", "4", "5"}},
        {"in", field("doc", "status").in({"closed", "pending"}), {"2", "4"}},
        {"exists", field("doc", "vip").exists(), {"3", "5"}},
        {"tricky", field("doc", "name") == tricky, {"5"}},
        {"bool", field("doc", "vip") == true, {"3"}},
        {"and-or-not",
         (field("doc", "status") == "open" && !(field("doc", "n") == 1)) || field("doc", "n") == 4,
         {"3", "4"}},
    };
    std::vector<std::unique_ptr<cftest::ChangeSink>> sinks;
    std::vector<changefeed::Subscription> subs;
    for (auto& c : cases) {
        sinks.push_back(std::make_unique<cftest::ChangeSink>());
        subs.push_back(changefeed::subscribe(coll("sub_filter"), sinks.back()->callback(), fast(c.filter || sentinel)));
    }
    pqxx::connection conn(cluster().conninfo());
    auto write = [&](int id, const boost::json::value& doc) {
        pqxx::work tx(conn);
        tx.exec_params("INSERT INTO sub_filter VALUES ($1, $2::jsonb)", id, boost::json::serialize(doc));
        tx.commit();
    };
    write(1, {{"status", "open"}, {"n", 1}});
    write(2, {{"status", "closed"}, {"n", 2}, {"name", "O'Brien"}});
    write(3, {{"status", "open"}, {"n", 3}, {"vip", true}});
    write(4, {{"status", "pending"}, {"n", 4}});
    write(5, {{"n", 5}, {"vip", false}, {"name", tricky}});
    write(99, {{"sentinel", 1}});
    for (std::size_t i = 0; i < cases.size(); ++i) {
        ASSERT_TRUE(cftest::eventually([&] { return sinks[i]->has("99"); })) << cases[i].name;
        auto ids = sinks[i]->ids();
        ids.pop_back();
        EXPECT_EQ(ids, cases[i].expected) << cases[i].name;
    }
    // The value travels as a variable, never inside the path.
    auto compiled = changefeed::compile(field("doc", "name") == tricky);
    EXPECT_EQ(compiled.jsonpath.find("Brien"), std::string::npos);
    EXPECT_EQ(compiled.vars.at("v0").as_string(), tricky);
}

TEST(Subscription, FilterRefusesNonScalarValues) {
    EXPECT_THROW(field("a") == boost::json::value(boost::json::array{1, 2}), changefeed::Error);
    EXPECT_THROW(field(), changefeed::Error);
}

TEST(Subscription, RemovedIsTestedOnThePreviousImageWhenKept) {
    cluster().exec("CREATE TABLE sub_rm_kept (id int PRIMARY KEY, status text);"
                   "SELECT changefeed.enable('sub_rm_kept', ranges => 2);"
                   "CREATE TABLE sub_rm_plain (id int PRIMARY KEY, status text);"
                   "SELECT changefeed.enable('sub_rm_plain', ranges => 2, keep_previous => false)");
    for (const std::string t : {"sub_rm_kept", "sub_rm_plain"})
        cluster().exec("INSERT INTO " + t + " VALUES (1, 'open'), (2, 'closed'), (99, 'marker')");
    auto filter = field("status") == "open" || field("status") == "marker";
    cftest::ChangeSink kept, plain;
    auto a = changefeed::subscribe(coll("sub_rm_kept"), kept.callback(), fast(filter));
    auto b = changefeed::subscribe(coll("sub_rm_plain"), plain.callback(), fast(filter));
    for (const std::string t : {"sub_rm_kept", "sub_rm_plain"}) {
        cluster().exec("DELETE FROM " + t + " WHERE id = 1");
        cluster().exec("DELETE FROM " + t + " WHERE id = 2");
        cluster().exec("UPDATE " + t + " SET status = 'marker' WHERE id = 99");
    }
    ASSERT_TRUE(cftest::eventually([&] { return kept.has("99") && plain.has("99"); }));
    EXPECT_EQ(kept.ids(), (std::vector<std::string>{"1", "99"}));        // the closed one filtered out
    EXPECT_EQ(plain.ids(), (std::vector<std::string>{"1", "2", "99"}));  // nothing to test: passed
    for (const auto& c : plain.all())
        if (c.operation == Operation::delete_) EXPECT_TRUE(c.previous.is_null());
}

// A filter is a view (filter_moves, the default): a document that starts
// matching arrives as a create, one that stops matching as a delete with the
// document before, one that matches on both sides as a replace.  Without it a
// replace is tested on the document after alone.
TEST(Subscription, AFilterIsAViewThatDocumentsEnterAndLeave) {
    cluster().exec("CREATE TABLE sub_view (id int PRIMARY KEY, status text, n int);"
                   "SELECT changefeed.enable('sub_view', ranges => 4)");
    auto filter = field("status") == "pending" || field("status") == "marker";
    cftest::ChangeSink view, legacy;
    auto a = changefeed::subscribe(coll("sub_view"), view.callback(), fast(filter));
    auto o = fast(filter);
    o.filter_moves = false;
    auto b = changefeed::subscribe(coll("sub_view"), legacy.callback(), o);
    cluster().exec("INSERT INTO sub_view VALUES (1, 'pending', 0), (2, 'shipped', 0)");
    cluster().exec("UPDATE sub_view SET status = 'shipped' WHERE id = 1");  // leaves
    cluster().exec("UPDATE sub_view SET status = 'pending' WHERE id = 2");  // enters
    cluster().exec("UPDATE sub_view SET n = 1 WHERE id = 2");               // stays
    cluster().exec("UPDATE sub_view SET n = 1 WHERE id = 1");               // stays out
    cluster().exec("INSERT INTO sub_view VALUES (99, 'marker', 0)");
    ASSERT_TRUE(cftest::eventually([&] { return view.has("99") && legacy.has("99"); }));
    auto lines = [](const cftest::ChangeSink& sink) {
        std::vector<std::string> out;
        for (const auto& c : sink.all()) {
            auto status = [](const boost::json::value& d) {
                return d.is_null() ? std::string("-") : std::string(d.at("status").as_string());
            };
            out.push_back(std::string(changefeed::to_string(c.operation)) + " " + c.doc_id + " " + status(c.previous) +
                          ">" + status(c.current));
        }
        return out;
    };
    using Lines = std::vector<std::string>;
    EXPECT_EQ(lines(view), (Lines{"create 1 ->pending", "delete 1 pending>-", "create 2 ->pending",
                                  "replace 2 pending>pending", "create 99 ->marker"}));
    EXPECT_EQ(lines(legacy), (Lines{"create 1 ->pending", "replace 2 shipped>pending", "replace 2 pending>pending",
                                    "create 99 ->marker"}));
}

TEST(Subscription, RolledBackWritesNeverArrive) {
    cftest::create_table(cluster(), "sub_rollback", 2);
    cftest::ChangeSink sink;
    auto sub = changefeed::subscribe(coll("sub_rollback"), sink.callback(), fast());
    {
        pqxx::connection c(cluster().conninfo());
        pqxx::work tx(c);
        tx.exec("INSERT INTO sub_rollback (id) VALUES (1)");
        tx.exec("SAVEPOINT s; INSERT INTO sub_rollback (id) VALUES (2); ROLLBACK TO SAVEPOINT s");
        tx.abort();
    }
    {
        pqxx::connection c(cluster().conninfo());
        pqxx::work tx(c);
        tx.exec("INSERT INTO sub_rollback (id) VALUES (3)");
        tx.exec("SAVEPOINT s; INSERT INTO sub_rollback (id) VALUES (4); ROLLBACK TO SAVEPOINT s");
        tx.commit();
    }
    cluster().exec("INSERT INTO sub_rollback (id) VALUES (5)");
    ASSERT_TRUE(cftest::eventually([&] { return sink.has("5"); }));
    EXPECT_EQ(sink.ids(), (std::vector<std::string>{"3", "5"}));
}

TEST(Subscription, ATransactionArrivesWholeAfterCommit) {
    cftest::create_table(cluster(), "sub_tx", 4);
    cftest::ChangeSink sink;
    auto sub = changefeed::subscribe(coll("sub_tx"), sink.callback(), fast());
    pqxx::connection writer(cluster().conninfo());
    pqxx::work tx(writer);
    for (int id = 11; id <= 15; ++id) tx.exec("INSERT INTO sub_tx (id) VALUES (" + std::to_string(id) + ")");
    // A later commit is delivered while the five are still uncommitted.
    cluster().exec("INSERT INTO sub_tx (id) VALUES (1)");
    ASSERT_TRUE(cftest::eventually([&] { return sink.has("1"); }));
    EXPECT_EQ(sink.all().size(), 1u);
    tx.commit();
    ASSERT_TRUE(cftest::eventually([&] { return sink.all().size() == 6; }));
    auto got = sink.all();
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(got[1 + i].doc_id, std::to_string(11 + i));
        EXPECT_EQ(got[1 + i].txid, got[1].txid);
    }
}

TEST(Subscription, SeesWritesOfAnotherProcess) {
    cftest::create_table(cluster(), "sub_other", 2);
    cftest::ChangeSink sink;
    auto sub = changefeed::subscribe(coll("sub_other"), sink.callback(), fast());
    const std::string cmd = "psql -X -q \"" + cluster().conninfo() +
                            "\" -c \"INSERT INTO sub_other (id, v) VALUES (42, 'from psql')\" >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    ASSERT_TRUE(cftest::eventually([&] { return sink.has("42"); }));
    EXPECT_EQ(sink.all()[0].current.at("v").as_string(), "from psql");
}

TEST(Subscription, PullIterationEndsWithTheStopToken) {
    cftest::create_table(cluster(), "sub_pull", 2);
    auto sub = changefeed::subscribe(coll("sub_pull"), fast());
    std::stop_source stop;
    std::vector<std::string> seen;
    std::thread consumer([&] {
        for (const auto& c : sub.changes(stop.get_token())) {
            seen.push_back(c.doc_id);
            if (seen.size() == 3) stop.request_stop();
        }
    });
    cluster().exec("INSERT INTO sub_pull (id) SELECT g FROM generate_series(1, 5) g");
    consumer.join();  // returns because the token stopped it
    EXPECT_EQ(seen, (std::vector<std::string>{"1", "2", "3"}));
    EXPECT_TRUE(sub.next(std::stop_token()).has_value());  // the rest is still there
}

TEST(Subscription, EndsWhenTheTableIsDisabled) {
    cftest::create_table(cluster(), "sub_disabled", 2);
    std::atomic<int> errors{0};
    auto o = fast();
    o.on_error = [&](const changefeed::ErrorInfo& e) {
        if (e.code == changefeed::errc::collection_not_enabled) ++errors;
    };
    auto sub = changefeed::subscribe(coll("sub_disabled"), o);
    cluster().exec("SELECT changefeed.disable('sub_disabled')");
    EXPECT_FALSE(sub.next().has_value());  // returns once the subscription ended
    EXPECT_FALSE(sub.active());
    EXPECT_EQ(sub.error(), changefeed::errc::collection_not_enabled);
    EXPECT_EQ(errors.load(), 1);
    try {
        changefeed::subscribe(coll("sub_disabled"));
        FAIL();
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.code(), changefeed::errc::collection_not_enabled);
    }
}

int client_connections() {
    return cluster()
        .exec("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'")[0][0]
        .as<int>();
}

TEST(Subscription, AHundredSubscribersCancelIndependently) {
    cftest::create_table(cluster(), "sub_many", 4);
    const int before = client_connections();
    constexpr int n = 100;
    std::vector<std::unique_ptr<cftest::ChangeSink>> sinks;
    std::vector<changefeed::Subscription> subs;
    for (int i = 0; i < n; ++i) {
        sinks.push_back(std::make_unique<cftest::ChangeSink>());
        subs.push_back(changefeed::subscribe(coll("sub_many"), sinks.back()->callback(), fast()));
    }
    // Shared connections: far fewer than one per subscriber.
    EXPECT_LE(client_connections(), before + 4);
    cluster().exec("INSERT INTO sub_many (id) VALUES (1)");
    ASSERT_TRUE(cftest::eventually([&] {
        for (auto& s : sinks)
            if (!s->has("1")) return false;
        return true;
    }));
    for (int i = 0; i < n; i += 2) subs[i].cancel();
    cluster().exec("INSERT INTO sub_many (id) VALUES (2)");
    ASSERT_TRUE(cftest::eventually([&] {
        for (int i = 1; i < n; i += 2)
            if (!sinks[i]->has("2")) return false;
        return true;
    }));
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(sinks[i]->has("2"), i % 2 == 1) << i;
        EXPECT_EQ(subs[i].active(), i % 2 == 1) << i;
    }
    subs.clear();  // destroying the rest releases the shared connections
    EXPECT_TRUE(cftest::eventually([&] { return client_connections() <= before; }));
}

// The event ids of `changes`, in delivery order.
std::vector<std::string> event_ids(const std::vector<Change>& changes) {
    std::vector<std::string> out;
    for (const auto& c : changes) out.push_back(c.event_id);
    return out;
}

// Subscriptions of one filter at one position share a read: each change
// reaches each matching subscription exactly once, in the log's order, also
// one that fell behind (its buffer full) and caught up alone, and none after
// a cancel amid the stream.  Once caught up, the one behind reads with the
// others: a wake-up then reads once per filter.
TEST(Subscription, ASharedReadDeliversEachChangeOnceToEachSubscription) {
    cluster().exec("CREATE TABLE sub_fanout (id int PRIMARY KEY, kind text);"
                   "SELECT changefeed.enable('sub_fanout', ranges => 4)");
    auto o = fast();
    o.poll_interval = std::chrono::hours(1);  // woken by notifications alone: rounds are wake-ups
    auto even = o;
    even.filter = field("kind") == "even";
    constexpr int n = 8;
    std::vector<std::unique_ptr<cftest::ChangeSink>> all_sinks, even_sinks;
    std::vector<changefeed::Subscription> subs;
    for (int i = 0; i < n; ++i) {
        all_sinks.push_back(std::make_unique<cftest::ChangeSink>());
        subs.push_back(changefeed::subscribe(coll("sub_fanout"), all_sinks.back()->callback(), o));
        even_sinks.push_back(std::make_unique<cftest::ChangeSink>());
        subs.push_back(changefeed::subscribe(coll("sub_fanout"), even_sinks.back()->callback(), even));
    }
    auto small = o;
    small.max_buffered = 5;
    auto behind = changefeed::subscribe(coll("sub_fanout"), small);  // pull, not drained for a while
    cftest::ChangeSink cancelled_sink;
    auto cancelled = changefeed::subscribe(coll("sub_fanout"), cancelled_sink.callback(), o);
    const auto from = cluster().exec("SELECT changefeed.current_position()")[0][0].as<std::string>();

    pqxx::connection writer_conn(cluster().conninfo());
    auto write = [&](int first, int last) {
        for (int id = first; id <= last; ++id) {  // one transaction each
            pqxx::work tx(writer_conn);
            tx.exec_params("INSERT INTO sub_fanout VALUES ($1, $2)", id, id % 2 ? "odd" : "even");
            tx.commit();
        }
    };
    auto all_have = [&](std::size_t count) {
        for (int i = 0; i < n; ++i)
            if (all_sinks[i]->all().size() < count || even_sinks[i]->all().size() < count / 2) return false;
        return true;
    };
    // Phase 1: a stream, and a cancel amid it.
    std::thread writer([&] { write(1, 60); });
    ASSERT_TRUE(cftest::eventually([&] { return cancelled_sink.all().size() >= 10; }));
    cancelled.cancel();
    const auto at_cancel = cancelled_sink.all().size();
    writer.join();
    ASSERT_TRUE(cftest::eventually([&] { return all_have(60); }));
    // Phase 2: `behind` holds at least its 5, so it is left out and falls behind.
    write(61, 120);
    ASSERT_TRUE(cftest::eventually([&] { return all_have(120); }));
    std::vector<Change> behind_got;
    while (behind_got.size() < 120) {
        auto c = behind.next();
        ASSERT_TRUE(c);
        behind_got.push_back(*c);
    }
    // Phase 3: everyone caught up.  Each wake-up reads the table once per filter.
    auto hub = changefeed::detail::Hub::of(cluster().conninfo());
    const auto before = hub->read_counts();
    for (int id = 121; id <= 130; ++id) {
        write(id, id);
        ASSERT_TRUE(cftest::eventually([&] { return all_have(id); }));
        auto c = behind.next();
        ASSERT_TRUE(c);
        behind_got.push_back(*c);
    }
    const auto after = hub->read_counts();
    EXPECT_GE(after.rounds - before.rounds, 1u);
    EXPECT_EQ(after.reads - before.reads, 2 * (after.rounds - before.rounds));  // the one behind joined
    EXPECT_FALSE(behind.try_next());

    // What the log holds, as one read of it returns it.
    auto r = cluster().exec("SELECT event_id, seq, doc_id FROM changefeed.read('sub_fanout', '" + from + "', 100000)");
    ASSERT_EQ(r.size(), 130u);
    std::vector<std::string> log_all, log_even;
    std::vector<std::int64_t> seqs;
    for (const auto& row : r) {
        log_all.push_back(row[0].as<std::string>());
        if (std::stoi(row[2].as<std::string>()) % 2 == 0) log_even.push_back(row[0].as<std::string>());
        seqs.push_back(row[1].as<std::int64_t>());
    }
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(event_ids(all_sinks[i]->all()), log_all) << i;
        EXPECT_EQ(event_ids(even_sinks[i]->all()), log_even) << i;
    }
    EXPECT_EQ(event_ids(behind_got), log_all);
    for (std::size_t i = 0; i < behind_got.size(); ++i) EXPECT_EQ(behind_got[i].seq, seqs[i]) << i;
    // The cancelled one: a prefix, and nothing after its cancel() returned.
    auto got = event_ids(cancelled_sink.all());
    EXPECT_EQ(got.size(), at_cancel);
    ASSERT_LE(got.size(), log_all.size());
    EXPECT_EQ(got, std::vector<std::string>(log_all.begin(), log_all.begin() + got.size()));
}

// A read that fails in a shared snapshot fails only the subscriptions it is
// about: one left behind whose history retention dropped ends
// (history_lost), the one read with it goes on.
TEST(Subscription, ALostHistoryEndsOnlyTheSubscriptionBehind) {
    cftest::create_table(cluster(), "sub_lost", 2);
    cftest::ChangeSink sink;
    auto hot = changefeed::subscribe(coll("sub_lost"), sink.callback(), fast());
    auto small = fast();
    small.max_buffered = 1;
    auto stalled = changefeed::subscribe(coll("sub_lost"), small);  // full after one change
    cluster().exec("INSERT INTO sub_lost (id) VALUES (1)");
    ASSERT_TRUE(cftest::eventually([&] { return sink.has("1"); }));
    cluster().exec("INSERT INTO sub_lost (id) VALUES (2)");
    ASSERT_TRUE(cftest::eventually([&] { return sink.has("2"); }));
    // Retention drops both changes: `stalled` still had to read the second.
    cluster().exec("SELECT changefeed.alter('sub_lost', retention => '1 day')");
    cluster().exec("SELECT changefeed.maintain(now() + interval '10 days')");
    cluster().exec("DELETE FROM changefeed.log_default; SELECT changefeed.create_partitions()");
    auto first = stalled.next();  // drains it: it reads on, with `hot`
    ASSERT_TRUE(first);
    EXPECT_EQ(first->doc_id, "1");
    EXPECT_FALSE(stalled.next().has_value());  // returns once it ended
    EXPECT_EQ(stalled.error(), changefeed::errc::history_lost);
    cluster().exec("INSERT INTO sub_lost (id) VALUES (3)");
    ASSERT_TRUE(cftest::eventually([&] { return sink.has("3"); }));
    EXPECT_EQ(sink.ids(), (std::vector<std::string>{"1", "2", "3"}));
    EXPECT_TRUE(hot.active());
}

}  // namespace
