// Compares what processors handled with what the change log holds: lost,
// phantom (handled, never committed) and out of order per document.
// Redeliveries are allowed (the feed is at least once): a change handled
// again is neither counted twice nor checked for order again.
#pragma once

#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <cstdint>
#include <map>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace cftest {

struct LoggedChange {
    std::string event_id;  // "<collection id>.<txid>.<seq>", as Change::event_id
    std::string doc_id;
    std::int64_t seq = 0;
};

// The table's changes in the log of `c`, by seq.
inline std::vector<LoggedChange> logged_changes(Cluster& c, const std::string& table) {
    std::vector<LoggedChange> out;
    for (auto row : c.exec("SELECT l.collection_id || '.' || l.txid || '.' || l.seq, coalesce(l.doc_id, ''), l.seq"
                           "  FROM changefeed.log l JOIN changefeed.collection c ON c.id = l.collection_id"
                           " WHERE c.relid = '" +
                           table + "'::regclass ORDER BY l.seq"))
        out.push_back({row[0].as<std::string>(), row[1].as<std::string>(), row[2].as<std::int64_t>()});
    return out;
}

struct FeedCheck {
    std::size_t logged = 0;      // changes in the log
    std::size_t handled = 0;     // changes handed to the handler, redeliveries included
    std::size_t distinct = 0;    // distinct event ids handled
    std::size_t lost = 0;        // all versions: logged, never handled; latest: a document's last change never handled
    std::size_t phantom = 0;     // handled, not in the log
    std::size_t misordered = 0;  // a document's change handled (first) after a later change of it
    std::vector<std::string> lost_sample;
    bool ok() const { return lost == 0 && phantom == 0 && misordered == 0; }
};

inline std::ostream& operator<<(std::ostream& o, const FeedCheck& r) {
    o << "logged=" << r.logged << " handled=" << r.handled << " distinct=" << r.distinct << " lost=" << r.lost
      << " phantom=" << r.phantom << " misordered=" << r.misordered;
    for (const auto& id : r.lost_sample) o << " lost:" << id;
    return o;
}

// `latest`: the latest-version feed, which owes each document's last change
// only (it may skip versions a later one replaced).
inline FeedCheck check_feed(const std::vector<LoggedChange>& logged, const std::vector<Handled>& handled, bool latest) {
    FeedCheck r;
    r.logged = logged.size();
    r.handled = handled.size();
    std::map<std::string, const LoggedChange*> by_id;
    std::map<std::string, std::string> last_of_doc;  // doc -> event id of its last change
    for (const auto& l : logged) {
        by_id[l.event_id] = &l;
        last_of_doc[l.doc_id] = l.event_id;
    }
    std::set<std::string> seen;
    std::map<std::string, std::int64_t> last_seq;  // per document, of first deliveries
    for (const auto& h : handled) {
        const std::string& id = h.change.event_id;
        if (!seen.insert(id).second) continue;
        auto it = by_id.find(id);
        if (it == by_id.end()) {
            ++r.phantom;
            continue;
        }
        auto& last = last_seq[it->second->doc_id];
        if (it->second->seq < last) ++r.misordered;
        last = std::max(last, it->second->seq);
    }
    r.distinct = seen.size();
    auto lose = [&](const std::string& id) {
        if (++r.lost <= 5) r.lost_sample.push_back(id);
    };
    if (latest) {
        for (const auto& [doc, id] : last_of_doc)
            if (!seen.count(id)) lose(id);
    } else {
        for (const auto& l : logged)
            if (!seen.count(l.event_id)) lose(l.event_id);
    }
    return r;
}

}  // namespace cftest
