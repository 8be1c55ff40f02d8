// Torture writers: N connections doing a random mix of insert, whole-row
// update, one-field jsonb patch and delete on public.docs and public.docs2,
// and now and then a TRUNCATE of public.docs2.  Every committed version is
// recorded in torture.truth by the same transaction, so the truth is exactly
// what committed, whatever happens to the connection or the server.
//
//   torture_writer --writers 8 --seconds 60 --changes 55000 --rate 1000 --stats FILE
//
// Connects with the PG* environment.  Stops at --seconds or once about
// --changes changes committed, whichever comes first.
#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Options {
    int writers = 8;
    int seconds = 60;
    long changes = 55000;
    int rate = 1000;      // committed changes per second over all writers (cap, not a goal)
    int max_ops = 8;      // writes per transaction: 1 .. max_ops
    long window = 10000;  // updates and deletes aim at the newest `window` ids of docs
    std::string stats;
    std::string progress;  // file rewritten every second with the committed changes so far
};

struct Counters {
    std::atomic<long> txns{0}, changes{0}, inserts{0}, updates{0}, patches{0}, deletes{0}, truncates{0};
    std::atomic<long> rollbacks{0}, savepoint_rollbacks{0}, held{0}, errors{0}, reconnects{0}, in_doubt{0};
};

Options opt;
Counters cnt;
// Highest id handed out per table: writers aim updates and deletes at recent ids.
std::atomic<long> max_id[2];
std::atomic<bool> done{false};
const char* const kTables[2] = {"public.docs", "public.docs2"};

// One write of a transaction, as it will count if the transaction commits.
struct Tally {
    long inserts = 0, updates = 0, patches = 0, deletes = 0, truncates = 0;
    long total() const { return inserts + updates + patches + deletes; }
    void add(const Tally& o) {
        inserts += o.inserts;
        updates += o.updates;
        patches += o.patches;
        deletes += o.deletes;
        truncates += o.truncates;
    }
};

// One document in three carries a 600-character pad: a replace of it has an
// image from before of over 512 bytes, which the log stores as a patch when a
// one-field patch (below) changed little of it.
std::string body(std::mt19937_64& rng, int writer) {
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::string s, pad;
    for (int i = 0; i < 24; ++i) s += alphabet[rng() % 36];
    if (rng() % 3 == 0)
        for (int i = 0; i < 600; ++i) pad += alphabet[rng() % 36];
    return "{\"n\": " + std::to_string(rng() % 100000) + ", \"w\": " + std::to_string(writer) + ", \"s\": \"" + s +
           "\", \"tags\": [\"t" + std::to_string(rng() % 10) + "\"]" +
           (pad.empty() ? "" : ", \"pad\": \"" + pad + "\"") + "}";
}

long pick_id(std::mt19937_64& rng, int t) {
    long hi = max_id[t].load();
    if (hi < 1) return 1;
    long window = t == 0 ? opt.window : std::max(100L, opt.window / 10);
    long lo = std::max(1L, hi - window);
    return lo + static_cast<long>(rng() % static_cast<unsigned long>(hi - lo + 1));
}

// One random write inside `tx`.  Each statement writes the table and its truth row together.
void one_write(pqxx::work& tx, std::mt19937_64& rng, int writer, Tally& t) {
    const int tbl = (rng() % 10 == 0) ? 1 : 0;
    const std::string table = kTables[tbl];
    const std::string tno = std::to_string(tbl);
    const int r = rng() % 100;
    if (r < 30) {
        auto res = tx.exec_params("WITH i AS (INSERT INTO " + table +
                                      " (id, vid, kver, body)"
                                      "  VALUES (nextval('torture.id_seq_" +
                                      tno +
                                      "'), nextval('torture.vid_seq'), 1, $1::jsonb)"
                                      "  RETURNING id, vid, kver, md5(body::text) AS body_md5)"
                                      " INSERT INTO torture.truth (tbl, id, vid, kver, op, body_md5) SELECT " +
                                      tno +
                                      ", id, vid, kver, 'i', body_md5 FROM i"
                                      " RETURNING id",
                                  body(rng, writer));
        long id = res[0][0].as<long>();
        long cur = max_id[tbl].load();
        while (id > cur && !max_id[tbl].compare_exchange_weak(cur, id)) {
        }
        ++t.inserts;
    } else if (r < 58) {
        auto res = tx.exec_params("WITH u AS (UPDATE " + table +
                                      " SET vid = nextval('torture.vid_seq'), kver = kver + 1, body = $2::jsonb"
                                      "  WHERE id = $1 RETURNING id, vid, kver, md5(body::text) AS body_md5)"
                                      " INSERT INTO torture.truth (tbl, id, vid, kver, op, body_md5) SELECT " +
                                      tno + ", id, vid, kver, 'u', body_md5 FROM u",
                                  pick_id(rng, tbl), body(rng, writer));
        t.updates += res.affected_rows();
    } else if (r < 85) {
        // A one-field patch of the jsonb document; the version columns move with it.
        auto res = tx.exec_params(
            "WITH u AS (UPDATE " + table +
                " SET vid = nextval('torture.vid_seq'), kver = kver + 1,"
                "  body = jsonb_set(body, '{n}', to_jsonb($2::int)) WHERE id = $1 RETURNING id, vid, kver, md5(body::text) AS body_md5)"
                " INSERT INTO torture.truth (tbl, id, vid, kver, op, body_md5) SELECT " +
                tno + ", id, vid, kver, 'p', body_md5 FROM u",
            pick_id(rng, tbl), static_cast<int>(rng() % 100000));
        t.patches += res.affected_rows();
    } else {
        // A delete is a version of its own: kver + 1, matched by the version it removed.
        auto res = tx.exec_params("WITH d AS (DELETE FROM " + table +
                                      " WHERE id = $1 RETURNING id, vid, kver)"
                                      " INSERT INTO torture.truth (tbl, id, vid, kver, op, prev_vid)"
                                      " SELECT " +
                                      tno + ", id, nextval('torture.vid_seq'), kver + 1, 'd', vid FROM d",
                                  pick_id(rng, tbl));
        t.deletes += res.affected_rows();
    }
}

// TRUNCATE of docs2 logs one clear per range; their seqs are the truth of it.
void truncate_docs2(pqxx::work& tx, Tally& t) {
    tx.exec("TRUNCATE public.docs2");
    tx.exec(
        "INSERT INTO torture.truth_clear (tbl, seq, range_id)"
        " SELECT 1, l.seq, l.range_id FROM changefeed.log l"
        "  WHERE l.collection_id = (SELECT id FROM changefeed.collections WHERE table_name = 'public.docs2'::regclass)"
        "    AND l.range_id = ANY (ARRAY(SELECT generate_series(0, 63)))"
        "    AND l.txid = pg_current_xact_id() AND l.op = 't'");
    ++t.truncates;
}

void writer_loop(int w, Clock::time_point deadline) {
    std::mt19937_64 rng(std::random_device{}() ^ (static_cast<unsigned long>(w) << 32));
    std::unique_ptr<pqxx::connection> conn;
    const double per_writer_rate = static_cast<double>(opt.rate) / opt.writers;
    auto started = Clock::now();
    long mine = 0;  // changes this writer committed, for its share of the rate
    int backoff_ms = 50;
    while (!done && Clock::now() < deadline) {
        if (cnt.changes.load() >= opt.changes) {
            done = true;
            break;
        }
        // Rate cap: stay at or below this writer's share.
        double ahead = mine / per_writer_rate - std::chrono::duration<double>(Clock::now() - started).count();
        if (ahead > 0) std::this_thread::sleep_for(std::chrono::duration<double>(std::min(ahead, 0.5)));
        try {
            if (!conn) {
                conn = std::make_unique<pqxx::connection>("application_name=torture_writer");
                backoff_ms = 50;
            }
        } catch (const std::exception&) {
            ++cnt.reconnects;
            std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
            backoff_ms = std::min(backoff_ms * 2, 1000);
            continue;
        }
        Tally tally;
        bool committing = false;
        try {
            pqxx::work tx(*conn);
            if (rng() % 2000 == 0) {
                truncate_docs2(tx, tally);
            } else {
                int ops = 1 + static_cast<int>(rng() % static_cast<unsigned>(opt.max_ops));
                for (int i = 0; i < ops; ++i) one_write(tx, rng, w, tally);
                if (rng() % 10 == 0) {
                    // Some writes roll back to a savepoint and must leave nothing.
                    tx.exec("SAVEPOINT sp");
                    Tally discarded;
                    int n = 1 + static_cast<int>(rng() % 3);
                    for (int i = 0; i < n; ++i) one_write(tx, rng, w, discarded);
                    tx.exec("ROLLBACK TO SAVEPOINT sp");
                    ++cnt.savepoint_rollbacks;
                    // The transaction goes on after the savepoint.
                    one_write(tx, rng, w, tally);
                }
            }
            if (rng() % 10 == 0) {
                // Held open: later transactions commit first, out of seq order.
                ++cnt.held;
                std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 501));
            }
            if (rng() % 20 == 0) {
                tx.abort();
                ++cnt.rollbacks;
                continue;
            }
            committing = true;
            tx.commit();
        } catch (const pqxx::in_doubt_error&) {
            // The commit may or may not have happened: the truth table knows.
            ++cnt.in_doubt;
            conn.reset();
            continue;
        } catch (const pqxx::broken_connection&) {
            if (committing) ++cnt.in_doubt;
            ++cnt.reconnects;
            conn.reset();
            continue;
        } catch (const pqxx::sql_error& e) {
            // Deadlocks between writers, a server shutting down: the transaction is gone.
            ++cnt.errors;
            if (std::string(e.sqlstate()).rfind("57", 0) == 0 || !conn->is_open()) conn.reset();
            continue;
        } catch (const std::exception& e) {
            ++cnt.errors;
            conn.reset();
            continue;
        }
        ++cnt.txns;
        mine += tally.total() + tally.truncates;
        cnt.changes += tally.total();
        cnt.inserts += tally.inserts;
        cnt.updates += tally.updates;
        cnt.patches += tally.patches;
        cnt.deletes += tally.deletes;
        cnt.truncates += tally.truncates;
    }
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "torture_writer: %s needs a value\n", a.c_str());
                std::exit(2);
            }
            return argv[++i];
        };
        if (a == "--writers") opt.writers = std::stoi(next());
        else if (a == "--seconds") opt.seconds = std::stoi(next());
        else if (a == "--changes") opt.changes = std::stol(next());
        else if (a == "--rate") opt.rate = std::stoi(next());
        else if (a == "--stats") opt.stats = next();
        else if (a == "--progress") opt.progress = next();
        else if (a == "--max-ops") opt.max_ops = std::stoi(next());
        else if (a == "--window") opt.window = std::stol(next());
        else {
            std::fprintf(stderr, "torture_writer: unknown option %s\n", a.c_str());
            return 2;
        }
    }
    if (opt.writers < 1 || opt.writers > 64 || opt.seconds < 1 || opt.rate < 1 || opt.max_ops < 1 || opt.window < 1) {
        std::fprintf(stderr, "torture_writer: bad option value\n");
        return 2;
    }
    {
        pqxx::connection c("application_name=torture_writer");
        pqxx::nontransaction tx(c);
        for (int t = 0; t < 2; ++t)
            max_id[t] = tx.exec("SELECT coalesce(max(id), 0) FROM " + std::string(kTables[t]))[0][0].as<long>();
    }
    auto deadline = Clock::now() + std::chrono::seconds(opt.seconds);
    std::vector<std::thread> threads;
    for (int w = 0; w < opt.writers; ++w) threads.emplace_back(writer_loop, w, deadline);
    // Progress for the fault schedule of the torture script.
    std::atomic<bool> joined{false};
    std::thread reporter([&] {
        while (!joined && !opt.progress.empty()) {
            std::string tmp = opt.progress + ".tmp";
            if (FILE* f = std::fopen(tmp.c_str(), "w")) {
                std::fprintf(f, "%ld\n", cnt.changes.load());
                std::fclose(f);
                std::rename(tmp.c_str(), opt.progress.c_str());
            }
            for (int i = 0; i < 10 && !joined; ++i) std::this_thread::sleep_for(100ms);
        }
    });
    for (auto& t : threads) t.join();
    joined = true;
    reporter.join();
    char line[512];
    std::snprintf(line, sizeof line,
                  "txns=%ld changes=%ld inserts=%ld updates=%ld patches=%ld deletes=%ld truncates=%ld "
                  "rollbacks=%ld savepoint_rollbacks=%ld held=%ld errors=%ld reconnects=%ld in_doubt=%ld",
                  cnt.txns.load(), cnt.changes.load(), cnt.inserts.load(), cnt.updates.load(), cnt.patches.load(),
                  cnt.deletes.load(), cnt.truncates.load(), cnt.rollbacks.load(), cnt.savepoint_rollbacks.load(),
                  cnt.held.load(), cnt.errors.load(), cnt.reconnects.load(), cnt.in_doubt.load());
    std::printf("%s\n", line);
    if (!opt.stats.empty()) {
        if (FILE* f = std::fopen(opt.stats.c_str(), "w")) {
            std::fprintf(f, "%s\n", line);
            std::fclose(f);
        }
    }
    return 0;
}
