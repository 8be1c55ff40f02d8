// CloudEvents that an outside SDK accepts: every envelope of tables with odd
// names and keys, from the bridge and from `changefeed tail --format
// cloudevents`, validated by the official JavaScript SDK (installed from the
// npm registry into a scratch folder; the test is skipped only when npm cannot
// reach the registry).  Also: each table its own source, the source decoding
// to the table's name, no empty subject, the CLI's bodies the bridge's bytes,
// and the Debezium source naming schema and table as they are.
#include "support/cluster.hpp"
#include "support/shell.hpp"

#include <sys/wait.h>

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

using cftest::cluster;
namespace json = boost::json;
using namespace std::chrono_literals;

CF_CLUSTER_ENVIRONMENT("cloudevents", CF_TEST_PORT, true);

namespace {

class RecordingPublisher : public changefeed::Publisher {
public:
    void publish(const std::vector<changefeed::Envelope>& envelopes) override {
        std::lock_guard lock(mu_);
        got_.insert(got_.end(), envelopes.begin(), envelopes.end());
    }
    std::vector<changefeed::Envelope> all() const {
        std::lock_guard lock(mu_);
        return got_;
    }

private:
    mutable std::mutex mu_;
    std::vector<changefeed::Envelope> got_;
};

using cftest::quote;
using cftest::slurp;

std::string literal(const std::string& s) {
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("''") : std::string(1, ch);
    return q + "'";
}

struct Run {
    int code = -1;
    std::string out;
};

// Runs `cmd` in a shell: its exit code and its stdout (and stderr unless `quiet`).
Run sh(const std::string& cmd, bool quiet = false) {
    const std::string out = cftest::test_file("sh.out");
    const int status = std::system((cmd + " >" + out + (quiet ? " 2>/dev/null" : " 2>&1")).c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out)};
}

std::string percent_decoded(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

// The SDK's module folder, installed once per run; empty (and `why` set) when
// the registry cannot be reached.
std::string cloudevents_sdk(std::string& why) {
    const std::string dir = std::string(CF_TEST_DIR) + "-cloudevents-sdk";
    const std::string module = dir + "/node_modules/cloudevents";
    if (sh("command -v node && command -v npm").code != 0) {
        ADD_FAILURE() << "node and npm are needed (Debian: apt-get install nodejs npm)";
        return "";
    }
    if (sh("test -f " + quote(module + "/package.json")).code == 0) return module;
    const auto install = sh("mkdir -p " + quote(dir) + " && cd " + quote(dir) +
                            " && npm install --no-save --no-audit --no-fund cloudevents");
    if (install.code == 0) return module;
    if (sh("npm ping").code != 0) {
        why = "npm cannot reach its registry, so the CloudEvents SDK cannot be installed:\n" + install.out;
        return "";
    }
    ADD_FAILURE() << "npm install cloudevents failed although the registry answers:\n" << install.out;
    return "";
}

// Schemas, tables and keys that an unencoded source or an empty subject broke.
struct OddTable {
    std::string schema, table;
    std::string qualified() const { return schema + "." + table; }
    std::string sql() const { return "\"" + schema + "\".\"" + table + "\""; }
};
const std::vector<OddTable> tables = {{"public", "Order Lines"},
                                      {"public", "a#b?c"},
                                      {"public", "a#x"},
                                      {"Ünï cödé/s", "50% off:[1]@x"}};
const std::vector<std::string> keys = {"", "plain", "a b", "#?/%", "ü€", "{\"k\": [1]}", "tab\there"};

}  // namespace

TEST(CloudEvents, EveryEnvelopeOfOddNamesAndKeysIsValidAndIdenticalFromBridgeAndCli) {
    std::string why;
    const std::string sdk = cloudevents_sdk(why);
    if (sdk.empty() && !why.empty()) GTEST_SKIP() << why;
    ASSERT_FALSE(sdk.empty());

    const std::string db = cluster().exec("SELECT current_database()")[0][0].as<std::string>();
    const std::size_t per_table = 3 * keys.size();  // create, replace, delete per key
    std::vector<std::string> lines;                 // every envelope, bridge's then CLI's
    std::set<std::string> sources;
    for (const auto& t : tables) {
        cluster().exec("CREATE SCHEMA IF NOT EXISTS \"" + t.schema + "\"; CREATE TABLE " + t.sql() +
                       " (k text PRIMARY KEY, v int); SELECT changefeed.enable(" + literal(t.sql()) + ", ranges => 4)");
        RecordingPublisher pub;
        changefeed::BridgeOptions o{changefeed::AllVersionsOptions(cftest::fast_options("ce"))};
        o.log = [](const changefeed::LogRecord&) {};
        changefeed::Bridge bridge({cluster().conninfo(), t.sql()}, "ce", changefeed::cloudevents_mapper(), pub, o);
        bridge.start();
        ASSERT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::running; }));
        for (const auto& k : keys) {
            cluster().exec("INSERT INTO " + t.sql() + " VALUES (" + literal(k) + ", 1)");
            cluster().exec("UPDATE " + t.sql() + " SET v = 2 WHERE k = " + literal(k));
            cluster().exec("DELETE FROM " + t.sql() + " WHERE k = " + literal(k));
        }
        ASSERT_TRUE(cftest::eventually([&] { return pub.all().size() >= per_table; })) << t.qualified();
        bridge.stop();

        std::map<std::string, std::string> bridge_bodies;
        std::set<std::string> subjects;
        for (const auto& e : pub.all()) {
            bridge_bodies[e.id] = e.body;
            const auto ev = json::parse(e.body).as_object();
            const std::string source(ev.at("source").as_string());
            sources.insert(source);
            EXPECT_EQ(percent_decoded(source), "/" + db + "/" + t.qualified()) << source;
            if (ev.contains("subject")) {
                EXPECT_FALSE(ev.at("subject").as_string().empty());
                subjects.insert(std::string(ev.at("subject").as_string()));
            }
            lines.push_back(e.body);
        }
        EXPECT_EQ(bridge_bodies.size(), per_table) << "an event id published twice";
        EXPECT_EQ(subjects.size(), keys.size() - 1) << "every key but the empty one names its events";

        // The CLI's envelopes are the bridge's, byte for byte.
        const auto cli = sh(quote(CF_CLI) + " -d " + quote(cluster().conninfo()) + " tail " + quote(t.sql()) +
                                " --from beginning --format cloudevents --count " + std::to_string(per_table) +
                                " --timeout 30",
                            true);
        ASSERT_EQ(cli.code, 0) << cli.out;
        std::istringstream in(cli.out);
        std::size_t n = 0;
        for (std::string line; std::getline(in, line);) {
            if (line.empty()) continue;
            ++n;
            const auto id = std::string(json::parse(line).at("id").as_string());
            ASSERT_TRUE(bridge_bodies.count(id)) << line;
            EXPECT_EQ(line, bridge_bodies.at(id));
            lines.push_back(line);
        }
        EXPECT_EQ(n, per_table);

        // Debezium: the source fields are the names themselves.
        changefeed::Change c;
        c.event_id = "x";
        c.doc_id = "";
        const auto dbz = changefeed::debezium_mapper({db, t.qualified()})(c, changefeed::MapContext{});
        const auto src = json::parse(dbz.at(0).body).at("source").as_object();
        EXPECT_EQ(src.at("db").as_string(), db);
        EXPECT_EQ(src.at("schema").as_string(), t.schema);
        EXPECT_EQ(src.at("table").as_string(), t.table);
    }
    EXPECT_EQ(sources.size(), tables.size()) << "two tables share a source";

    const std::string file = cftest::test_file("envelopes.jsonl");
    {
        std::ofstream out(file);
        for (const auto& l : lines) out << l << '\n';
    }
    const auto v = sh("CLOUDEVENTS_SDK=" + quote(sdk) + " node " +
                      quote(std::string(CF_SOURCE_DIR) + "/test/cloudevents/validate.js") + " " + quote(file));
    EXPECT_EQ(v.code, 0) << v.out;
    std::cout << v.out;
    EXPECT_NE(v.out.find("valid " + std::to_string(lines.size()) + " of " + std::to_string(lines.size())),
              std::string::npos)
        << v.out;
}
