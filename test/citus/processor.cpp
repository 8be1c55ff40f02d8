// The Citus stage's processor (test/stages/citus.sh): an all-versions
// processor "citus-check" on the distributed table public.docs, read on the
// coordinator, whose transactional handler writes each change it is handed
// into citus_check.deliveries in the transaction that stores its checkpoint
// (exactly once).  Several instances split the ranges; the stage kills and
// restarts them.
//
//   citus_processor INSTANCE [--max-seconds N]
//
// Connects with the PG* environment.  Runs until SIGTERM/SIGINT, or --max-seconds.
#include <changefeed/changefeed.hpp>
#include <pqxx/pqxx>

#include <boost/json.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;

std::string num(std::int64_t v) { return std::to_string(v); }

// v of an image, or NULL.
std::string v_of(const boost::json::value& doc) {
    if (!doc.is_object()) return "NULL";
    const auto* v = doc.as_object().if_contains("v");
    if (v == nullptr) return "NULL";
    if (v->is_int64()) return num(v->as_int64());
    if (v->is_uint64()) return num(static_cast<std::int64_t>(v->as_uint64()));
    return "NULL";
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

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: citus_processor INSTANCE [--max-seconds N]\n");
        return 2;
    }
    std::string instance = argv[1];
    int max_seconds = 3600;
    for (int i = 2; i + 1 < argc; i += 2)
        if (std::string(argv[i]) == "--max-seconds") max_seconds = std::atoi(argv[i + 1]);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    try {
        changefeed::ProcessorOptions o;
        o.instance_name = instance;
        o.lease_duration = 3s;
        o.renew_interval = 1s;
        o.acquire_interval = 500ms;
        o.poll_interval = 1s;
        o.retry_delay = 200ms;
        o.max_batch_size = 500;
        o.on_error = [&](const changefeed::ErrorInfo& e) {
            std::fprintf(stderr, "[%s] on_error: %s\n", instance.c_str(), e.message.c_str());
        };
        o.log = [](const changefeed::LogRecord&) {};
        changefeed::Collection coll("application_name=citus_processor", "public.docs");
        auto proc = changefeed::make_processor(
            coll, "citus-check",
            changefeed::TransactionalHandler([instance](const std::vector<changefeed::Change>& batch,
                                                        changefeed::Transaction& tx, const changefeed::Context& ctx) {
                std::string sql = "INSERT INTO citus_check.deliveries (inst, range_id, seq, op, id, v, prev_v) VALUES ";
                for (std::size_t i = 0; i < batch.size(); ++i) {
                    const auto& c = batch[i];
                    if (i) sql += ",";
                    sql += "(" + tx.sql().quote(instance) + "," + num(ctx.range_id) + "," + num(c.seq) + ",'" +
                           op_code(c.operation) + "'," +
                           (c.operation == changefeed::Operation::clear ? "NULL" : num(std::stoll(c.doc_id))) + "," +
                           v_of(c.current) + "," + v_of(c.previous) + ")";
                }
                tx.sql().exec(sql);
            }),
            changefeed::AllVersionsOptions(o));
        for (int attempt = 0;; ++attempt) {
            try {
                proc.start();
                break;
            } catch (const std::exception& e) {
                if (attempt >= 100) throw;
                std::this_thread::sleep_for(300ms);
            }
        }
        timespec ts{max_seconds, 0};
        sigtimedwait(&set, nullptr, &ts);
        proc.stop();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "citus_processor: %s\n", e.what());
        return 1;
    }
    return 0;
}
