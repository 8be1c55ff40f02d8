#include "support/markers.hpp"

#include <algorithm>

namespace cftest {

std::vector<std::string> deliver_markers(Cluster& c, const std::string& table, int first_id, const Recorder& rec,
                                         std::chrono::milliseconds timeout) {
    return deliver_markers(
        c, table, first_id, [&rec](const std::string& id) { return rec.has(id); }, timeout);
}

bool is_marker(const changefeed::Change& change) {
    const auto* obj = change.current.if_object();
    if (!obj) return false;
    const auto it = obj->find("v");
    return it != obj->end() && it->value().is_string() && it->value().as_string() == "marker";
}

std::vector<std::string> deliver_markers(Cluster& c, const std::string& table, int first_id,
                                         const std::function<bool(const std::string&)>& handled,
                                         std::chrono::milliseconds timeout) {
    // The first id of each range (the partition key is the id's text).
    const auto rows = c.exec("SELECT min(g)::text FROM changefeed.collections col, generate_series(" +
                             std::to_string(first_id) + ", " + std::to_string(first_id) +
                             " + 64 * col.ranges) g WHERE col.table_name = '" + table +
                             "'::regclass GROUP BY changefeed.range_of(g::text, col.ranges)");
    std::vector<std::string> ids;
    std::string values, list;
    for (const auto& row : rows) {
        ids.push_back(row[0].as<std::string>());
        values += (values.empty() ? "(" : ", (") + ids.back() + ", 'marker')";
        list += (list.empty() ? "" : ",") + ids.back();
    }
    c.exec("INSERT INTO " + table + " (id, v) VALUES " + values);
    // The log placed them as computed: one in every range.
    const bool every_range = c.exec("SELECT count(DISTINCT l.range_id) = max(col.ranges) FROM changefeed.log l"
                                    "  JOIN changefeed.collections col ON col.id = l.collection_id"
                                    " WHERE col.table_name = '" +
                                    table +
                                    "'::regclass AND l.current->>'v' = 'marker'"
                                    "   AND l.doc_id = ANY (string_to_array('" +
                                    list + "', ','))")[0][0]
                                 .as<bool>(false);
    if (!every_range) return {};
    const bool all = eventually(
        [&] {
            for (const auto& id : ids)
                if (!handled(id)) return false;
            return true;
        },
        timeout);
    return all ? ids : std::vector<std::string>{};
}

bool witness_rounds(Cluster& c, const std::string& table, int first_id, int rounds) {
    Recorder seen;
    auto witness = changefeed::make_processor({c.conninfo(), table}, "witness_" + std::to_string(first_id),
                                              seen.handler(), changefeed::AllVersionsOptions(fast_options("witness")));
    witness.start();
    if (!wait_running(witness)) return false;
    int next = first_id;
    for (int i = 0; i < rounds; ++i) {
        const auto ids = deliver_markers(c, table, next, seen);
        if (ids.empty()) return false;
        for (const auto& id : ids) next = std::max(next, std::stoi(id) + 1);
    }
    witness.stop();
    return true;
}

}  // namespace cftest
