// Compares what a stream holds with what the change log committed: the
// NATS suites' checker (lost, invented, stored twice, out of order per document).
#pragma once

#include "support/cluster.hpp"
#include "support/nats_server.hpp"

#include <boost/json.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace cftest {

struct CommittedChange {
    std::string event_id;
    std::string doc_id;
    std::int64_t seq = 0;
};

// The table's changes in the log, by seq, with their event ids ("<collection id>.<txid>.<seq>").
inline std::vector<CommittedChange> committed_changes(Cluster& c, const std::string& table) {
    std::vector<CommittedChange> out;
    for (auto row : c.exec("SELECT l.collection_id || '.' || l.txid || '.' || l.seq, coalesce(l.doc_id, ''), l.seq"
                           "  FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id"
                           " WHERE c.relid = '" +
                           table + "'::regclass ORDER BY l.seq"))
        out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::int64_t>()});
    return out;
}

struct StreamCheck {
    std::size_t changes = 0;               // committed
    std::size_t stored = 0;                // messages in the stream
    std::size_t distinct = 0;              // distinct Nats-Msg-Ids
    std::size_t lost = 0;                  // committed, not in the stream
    std::size_t invented = 0;              // in the stream, not committed
    std::size_t stored_twice = 0;          // messages whose Nats-Msg-Id an earlier message had
    std::size_t misordered = 0;            // a document's change stored after a later change of it
    std::vector<std::string> lost_sample;  // the first lost event ids, for the failure message
    bool ok() const {
        return lost == 0 && invented == 0 && stored_twice == 0 && misordered == 0 && changes == distinct;
    }
};

// Messages are those of test_mapper (body: doc, seq).
inline StreamCheck check_stream(const std::vector<CommittedChange>& committed,
                                const std::vector<StoredMessage>& stored) {
    StreamCheck r;
    r.changes = committed.size();
    r.stored = stored.size();
    std::set<std::string> want;
    for (const auto& c : committed) want.insert(c.event_id);
    std::set<std::string> seen;
    std::map<std::string, std::int64_t> last_seq;  // per document
    for (const auto& m : stored) {
        if (!seen.insert(m.msg_id).second) {
            ++r.stored_twice;
            continue;
        }
        if (!want.count(m.msg_id)) ++r.invented;
        auto body = boost::json::parse(m.data).as_object();
        std::string doc = body.at("doc").as_string().c_str();
        std::int64_t seq = body.at("seq").as_int64();
        auto it = last_seq.find(doc);
        if (it != last_seq.end() && seq < it->second) ++r.misordered;
        last_seq[doc] = std::max(seq, it == last_seq.end() ? seq : it->second);
    }
    r.distinct = seen.size();
    for (const auto& id : want)
        if (!seen.count(id) && ++r.lost <= 5) r.lost_sample.push_back(id);
    return r;
}

inline std::ostream& operator<<(std::ostream& o, const StreamCheck& r) {
    o << "changes=" << r.changes << " stored=" << r.stored << " distinct=" << r.distinct << " lost=" << r.lost
      << " invented=" << r.invented << " stored_twice=" << r.stored_twice << " misordered=" << r.misordered;
    for (const auto& id : r.lost_sample) o << " lost:" << id;
    return o;
}

}  // namespace cftest
