// Torture consumer: one process, killed and restarted by the torture script.
//
//   torture_consumer all INSTANCE      all-versions processors "torture-all" on public.docs and
//                                      public.docs2; every delivery goes into torture.deliveries,
//                                      committed before the handler returns (at least once)
//   torture_consumer latest INSTANCE   latest-version processors "torture-latest" maintaining
//                                      torture.projection
//   torture_consumer exact INSTANCE    all-versions processors "torture-exact" with a transactional
//                                      handler: torture.exact_projection and one torture.exact_applied
//                                      row per event id are written in the transaction that stores
//                                      the checkpoint (exactly once: a second application counts up)
//   torture_consumer project INSTANCE  all-versions Projector processors "torture-project": each
//                                      projector call is one torture.project_calls row (event id,
//                                      process id, time), committed before the projector returns,
//                                      on a connection of its own (application_name torture_projection)
//   torture_consumer rls INSTANCE      all-versions processors "torture-rls" connected as role
//                                      torture_rls, which row-level security lets see the even keys:
//                                      every delivery goes into torture.rls_deliveries
//   torture_consumer broken SLOT       a deliberately wrong consumer that reads changefeed.log by
//                                      "seq > last seen" instead of changefeed.read(); handles the
//                                      ranges with range_id % 3 = SLOT (shows the checker catches it)
//
// Options: --batch N (most changes per handler call, default 200), --max-seconds N,
// --pooler MODE (the processors connect with changefeed_pooler=MODE: through PgBouncer).
// Connects with the PG* environment.  Runs until SIGTERM/SIGINT, or --max-seconds.
#include <changefeed/changefeed.hpp>
#include <pqxx/pqxx>

#include <boost/json.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>

namespace {

using namespace std::chrono_literals;

const char* const kConninfo = "application_name=torture_consumer";
// The processors' connection string: kConninfo, with --pooler's changefeed_pooler.
std::string processor_conninfo = kConninfo;
const char* const kTables[2] = {"public.docs", "public.docs2"};

// Numbers spliced into SQL below come only from here: parsed as integers, so never text.
std::string num(std::int64_t v) { return std::to_string(v); }

std::int64_t json_int(const boost::json::value& doc, const char* field) {
    const auto& o = doc.as_object();
    const auto& v = o.at(field);
    if (v.is_int64()) return v.as_int64();
    if (v.is_uint64()) return static_cast<std::int64_t>(v.as_uint64());
    throw std::runtime_error(std::string("field ") + field + " is not an integer");
}

const char* op_code(changefeed::Operation op) {
    switch (op) {
        case changefeed::Operation::create: return "c";
        case changefeed::Operation::replace: return "r";
        case changefeed::Operation::delete_: return "d";
        case changefeed::Operation::clear: return "t";
    }
    return "?";
}

// A connection of the handler's own, reopened after a failure.
class Sink {
public:
    template <class F>
    void run(F&& f) {
        try {
            if (!conn_) conn_ = std::make_unique<pqxx::connection>(kConninfo);
            pqxx::work tx(*conn_);
            f(tx);
            tx.commit();
        } catch (...) {
            conn_.reset();
            throw;  // the processor hands us the batch again
        }
    }

private:
    std::unique_ptr<pqxx::connection> conn_;
};

// One row of torture.deliveries per delivered change.
std::string delivery_values(int tbl, const std::string& inst, const changefeed::Change& c,
                            const changefeed::Context& ctx, pqxx::work& tx) {
    std::string id = "NULL", vid = "NULL", kver = "NULL", prev = "NULL", prev_md5 = "NULL";
    if (c.operation != changefeed::Operation::clear) id = num(std::stoll(c.doc_id));
    if (c.operation == changefeed::Operation::create || c.operation == changefeed::Operation::replace) {
        vid = num(json_int(c.current, "vid"));
        kver = num(json_int(c.current, "kver"));
    } else if (c.operation == changefeed::Operation::delete_) {
        kver = num(json_int(c.previous, "kver") + 1);
    }
    if (c.operation == changefeed::Operation::replace || c.operation == changefeed::Operation::delete_) {
        // The image from before, whole (the log may hold it as a patch): the
        // checker compares it with the version it replaced.
        prev = num(json_int(c.previous, "vid"));
        prev_md5 = "md5(" + tx.quote(boost::json::serialize(c.previous.at("body"))) + "::jsonb::text)";
    }
    return "(" + num(tbl) + "," + tx.quote(inst) + "," + num(ctx.range_id) + "," + num(c.seq) + ",'" +
           op_code(c.operation) + "'," + id + "," + vid + "," + kver + "," + prev + "," + num(ctx.lease_epoch) + "," +
           prev_md5 + ")";
}

// The statements that apply one change to torture.exact_projection and count
// its application in torture.exact_applied.
std::string exact_statements(int tbl, const changefeed::Change& c, const changefeed::Context& ctx,
                             pqxx::transaction_base& tx) {
    std::string sql = "INSERT INTO torture.exact_applied (event_id, tbl, seq) VALUES (" + tx.quote(c.event_id) + "," +
                      num(tbl) + "," + num(c.seq) +
                      ") ON CONFLICT (event_id) DO UPDATE SET n = torture.exact_applied.n + 1;";
    switch (c.operation) {
        case changefeed::Operation::create:
        case changefeed::Operation::replace:
            sql += "INSERT INTO torture.exact_projection (tbl, id, vid, kver) VALUES (" + num(tbl) + "," +
                   num(std::stoll(c.doc_id)) + "," + num(json_int(c.current, "vid")) + "," +
                   num(json_int(c.current, "kver")) +
                   ") ON CONFLICT (tbl, id) DO UPDATE SET vid = excluded.vid, kver = excluded.kver;";
            break;
        case changefeed::Operation::delete_:
            sql += "DELETE FROM torture.exact_projection WHERE tbl = " + num(tbl) +
                   " AND id = " + num(std::stoll(c.doc_id)) + ";";
            break;
        case changefeed::Operation::clear:
            // A TRUNCATE logs one clear per range: empty that range.
            sql +=
                "DELETE FROM torture.exact_projection WHERE tbl = " + num(tbl) +
                " AND changefeed.range_of(id::text, (SELECT c.ranges FROM changefeed.collections c WHERE c.table_name = " +
                (tbl == 0 ? "'public.docs'" : "'public.docs2'") + "::regclass)) = " + num(ctx.range_id) + ";";
            break;
    }
    return sql;
}

int run_processors(const std::string& kind, const std::string& instance, sigset_t& set, int max_seconds, int batch) {
    const bool latest = kind == "latest";
    std::string run_id = instance + "#" + num(getpid());
    changefeed::ProcessorOptions o;
    o.instance_name = instance;
    o.lease_duration = 3s;
    o.renew_interval = 1s;
    o.acquire_interval = 500ms;
    o.poll_interval = 1s;
    o.retry_delay = 200ms;
    o.reconnect_min = 100ms;
    o.reconnect_max = 2s;
    o.idle_checkpoint_interval = 5s;
    o.max_batch_size = batch;
    std::mutex log_mu;
    long errors = 0;
    o.on_error = [&](const changefeed::ErrorInfo& e) {
        std::lock_guard lock(log_mu);
        // Connection drops are expected here; keep the log short.
        if (++errors <= 200) std::fprintf(stderr, "[%s] on_error: %s\n", instance.c_str(), e.message.c_str());
    };
    // The failures are printed above; the library's other log lines would repeat them.
    o.log = [](const changefeed::LogRecord&) {};
    std::vector<changefeed::Processor> procs;
    Sink sinks[2];
    std::unique_ptr<pqxx::connection> calls[2];  // the projectors' (kind project)
    for (int t = 0; t < 2; ++t) {
        changefeed::Collection coll(processor_conninfo, kTables[t]);
        Sink* sink = &sinks[t];
        if (kind == "project") {
            const std::string pid = num(getpid());
            std::unique_ptr<pqxx::connection>* conn = &calls[t];
            procs.push_back(changefeed::make_processor(
                coll, "torture-project",
                changefeed::Projector([conn, t, pid](const changefeed::Change& c, const changefeed::Context&) {
                    try {
                        if (!*conn) *conn = std::make_unique<pqxx::connection>("application_name=torture_projection");
                        pqxx::nontransaction tx(**conn);
                        tx.exec("INSERT INTO torture.project_calls (event_id, tbl, seq, pid) VALUES (" +
                                tx.quote(c.event_id) + "," + num(t) + "," + num(c.seq) + "," + pid + ")");
                    } catch (...) {
                        conn->reset();
                        throw;  // called again for this change
                    }
                    return changefeed::ProjectionResult::applied;
                }),
                changefeed::AllVersionsOptions(o)));
        } else if (kind == "exact") {
            procs.push_back(changefeed::make_processor(
                coll, "torture-exact",
                changefeed::TransactionalHandler([t](const std::vector<changefeed::Change>& batch,
                                                     changefeed::Transaction& tx, const changefeed::Context& ctx) {
                    std::string sql;
                    for (const auto& c : batch) sql += exact_statements(t, c, ctx, tx.sql());
                    tx.sql().exec(sql);
                }),
                changefeed::AllVersionsOptions(o)));
        } else if (latest) {
            procs.push_back(changefeed::make_processor(
                coll, "torture-latest",
                [sink, t](const std::vector<changefeed::Change>& batch, const changefeed::Context&) {
                    // Last write wins, in delivery order: a key appears once per statement.
                    std::map<std::int64_t, std::pair<std::int64_t, std::int64_t>> last;
                    for (const auto& c : batch)
                        last[std::stoll(c.doc_id)] = {json_int(c.current, "vid"), json_int(c.current, "kver")};
                    sink->run([&](pqxx::work& tx) {
                        std::string sql = "INSERT INTO torture.projection (tbl, id, vid, kver) VALUES ";
                        bool first = true;
                        for (const auto& [id, v] : last) {
                            sql += (first ? "(" : ",(") + num(t) + "," + num(id) + "," + num(v.first) + "," +
                                   num(v.second) + ")";
                            first = false;
                        }
                        sql += " ON CONFLICT (tbl, id) DO UPDATE SET vid = excluded.vid, kver = excluded.kver";
                        tx.exec(sql);
                    });
                },
                o));
        } else {
            // kind all, or rls: the same processor as a role bound by policies.
            const bool rls = kind == "rls";
            const std::string into = rls ? "torture.rls_deliveries" : "torture.deliveries";
            procs.push_back(changefeed::make_processor(
                rls ? changefeed::Collection(processor_conninfo + " user=torture_rls", kTables[t]) : coll,
                rls ? "torture-rls" : "torture-all",
                [sink, t, run_id, into](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
                    sink->run([&](pqxx::work& tx) {
                        std::string sql = "INSERT INTO " + into +
                                          " (tbl, inst, range_id, seq, op, id, vid, kver, prev_vid, epoch, prev_md5)"
                                          " VALUES ";
                        for (std::size_t i = 0; i < batch.size(); ++i) {
                            if (i) sql += ",";
                            sql += delivery_values(t, run_id, batch[i], ctx, tx);
                        }
                        tx.exec(sql);
                    });
                },
                changefeed::AllVersionsOptions(o)));
        }
    }
    // The server may be restarting when we are started: retry start() for a while.
    for (auto& p : procs) {
        for (int attempt = 0;; ++attempt) {
            try {
                p.start();
                break;
            } catch (const std::exception& e) {
                if (attempt >= 100) throw;
                std::this_thread::sleep_for(300ms);
            }
        }
    }
    timespec ts{max_seconds, 0};
    sigtimedwait(&set, nullptr, &ts);
    for (auto& p : procs) p.stop();
    return 0;
}

// The classic home-made change log reader: remembers the highest seq it saw.
// Sequence numbers are taken before commit, so a transaction that commits
// after a later-numbered one is skipped for good.
int run_broken(int slot, sigset_t& set, int max_seconds) {
    std::string run_id = "broken-" + num(slot) + "#" + num(getpid());
    std::unique_ptr<pqxx::connection> conn;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(max_seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        timespec zero{0, 0};
        if (sigtimedwait(&set, nullptr, &zero) > 0) break;
        bool busy = false;
        try {
            if (!conn) conn = std::make_unique<pqxx::connection>(kConninfo);
            for (int t = 0; t < 2; ++t) {
                pqxx::work tx(*conn);
                auto last = tx.exec_params(
                                  "INSERT INTO torture.broken_checkpoint (tbl, slot, last_seq) VALUES ($1, $2, 0)"
                                  " ON CONFLICT (tbl, slot) DO UPDATE SET last_seq = torture.broken_checkpoint.last_seq"
                                  " RETURNING last_seq",
                                  t, slot)[0][0]
                                .as<std::int64_t>();
                auto rows = tx.exec_params(
                    "SELECT l.seq, l.range_id, l.op, l.doc_id, l.current->>'vid', l.current->>'kver',"
                    "       p.whole->>'vid', p.whole->>'kver', md5((p.whole->'body')::text)"
                    "  FROM changefeed.log l JOIN changefeed.collections c ON c.id = l.collection_id"
                    "  CROSS JOIN LATERAL (SELECT changefeed.whole_previous(l.current, l.previous) AS whole) p"
                    " WHERE c.table_name = $1::regclass AND l.seq > $2 AND l.range_id % 3 = $3"
                    " ORDER BY l.seq LIMIT 500",
                    kTables[t], last, slot);
                if (rows.empty()) {
                    tx.commit();
                    continue;
                }
                busy = true;
                std::string sql =
                    "INSERT INTO torture.deliveries (tbl, inst, range_id, seq, op, id, vid, kver, prev_vid, epoch, prev_md5)"
                    " VALUES ";
                for (std::size_t i = 0; i < rows.size(); ++i) {
                    const auto& r = rows[i];
                    std::string op = r[2].as<std::string>();
                    std::string id = r[3].is_null() ? "NULL" : num(std::stoll(r[3].as<std::string>()));
                    std::string vid = "NULL", kver = "NULL", prev = "NULL", prev_md5 = "NULL";
                    if (op == "c" || op == "r") {
                        vid = num(r[4].as<std::int64_t>());
                        kver = num(r[5].as<std::int64_t>());
                    } else if (op == "d") {
                        kver = num(r[7].as<std::int64_t>() + 1);
                    }
                    if (op == "r" || op == "d") {
                        prev = num(r[6].as<std::int64_t>());
                        prev_md5 = tx.quote(r[8].as<std::string>());
                    }
                    if (i) sql += ",";
                    sql += "(" + num(t) + "," + tx.quote(run_id) + "," + num(r[1].as<int>()) + "," +
                           num(r[0].as<std::int64_t>()) + "," + tx.quote(op) + "," + id + "," + vid + "," + kver + "," +
                           prev + ",0," + prev_md5 + ")";
                }
                tx.exec(sql);
                tx.exec_params("UPDATE torture.broken_checkpoint SET last_seq = $3 WHERE tbl = $1 AND slot = $2", t,
                               slot, rows[rows.size() - 1][0].as<std::int64_t>());
                tx.commit();
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "[%s] %s\n", run_id.c_str(), e.what());
            conn.reset();
            std::this_thread::sleep_for(300ms);
        }
        if (!busy) std::this_thread::sleep_for(200ms);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(
            stderr,
            "usage: torture_consumer all|latest|exact|project|broken INSTANCE|SLOT [--batch N] [--max-seconds N]\n");
        return 2;
    }
    std::string mode = argv[1];
    int max_seconds = 7200, batch = 200;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (std::string(argv[i]) == "--max-seconds") max_seconds = std::atoi(argv[i + 1]);
        else if (std::string(argv[i]) == "--batch") batch = std::atoi(argv[i + 1]);
        else if (std::string(argv[i]) == "--pooler")
            processor_conninfo += std::string(" changefeed_pooler=") + argv[i + 1];
    }
    // Blocked before any thread starts, so that only sigtimedwait() gets them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    try {
        if (mode == "all" || mode == "rls" || mode == "latest" || mode == "exact" || mode == "project")
            return run_processors(mode, argv[2], set, max_seconds, batch);
        if (mode == "broken") return run_broken(std::atoi(argv[2]), set, max_seconds);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "torture_consumer: %s\n", e.what());
        return 1;
    }
    std::fprintf(stderr, "torture_consumer: unknown mode %s\n", mode.c_str());
    return 2;
}
