// The envelope the NATS suites publish: id = the change's event id, a JSON
// body with the document id, operation, log sequence and the document.  The
// suites' own, so that they test the publisher and the bridge, not a mapper.
#pragma once

#include <changefeed/bridge.hpp>

#include <boost/json.hpp>

#include <string>
#include <vector>

namespace cftest {

inline changefeed::Mapper test_mapper(std::string table) {
    return [table](const changefeed::Change& c, const changefeed::Context&) {
        boost::json::object body;
        body["doc"] = c.doc_id;
        body["op"] = changefeed::to_string(c.operation);
        body["seq"] = c.seq;
        body["document"] = c.current;
        changefeed::Envelope e;
        e.id = c.event_id;
        e.table = table;
        e.body = boost::json::serialize(body);
        e.headers["Changefeed-Doc"] = c.doc_id;
        return std::vector<changefeed::Envelope>{std::move(e)};
    };
}

}  // namespace cftest
