// Records what handlers were given, thread-safely, for assertions.
#pragma once

#include <changefeed/changefeed.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace cftest {

// The row's column v (text holding a number) as an int; -1 when it has none.
int v_of(const changefeed::Change& c);

struct Handled {
    changefeed::Change change;
    changefeed::Context context;
};

// One handled change as the ordering checks see it: who handled it, under
// which lease, which version of the document (v_of).
struct Delivery {
    std::string instance;
    int range = 0;
    std::int64_t epoch = 0;
    std::string doc;
    int v = -1;
};

class Recorder {
public:
    // A handler that records every change it is given, after `delay` (a slow
    // handler).
    changefeed::Handler handler(std::chrono::milliseconds delay = std::chrono::milliseconds(0));
    void add(const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx);

    std::vector<Handled> all() const;
    std::vector<Delivery> deliveries() const;
    std::size_t size() const;
    std::size_t batches() const;
    bool empty_batch_seen() const;
    // How often each doc id was handled.
    std::map<std::string, int> counts() const;
    bool has(const std::string& doc_id) const;
    // How often `doc_id` was handled.
    int count(const std::string& doc_id) const;
    // How many handled changes came from a backfill.
    std::size_t from_backfill() const;
    // The changes of a doc id, in handling order.
    std::vector<changefeed::Change> of(const std::string& doc_id) const;

private:
    mutable std::mutex mu_;
    std::vector<Handled> handled_;
    std::size_t batches_ = 0;
    bool empty_ = false;
};

// Records what on_error is told.
class ErrorLog {
public:
    std::function<void(const changefeed::ErrorInfo&)> sink();
    std::vector<changefeed::ErrorInfo> all() const;
    // Whether an error with this code was reported.
    bool has(changefeed::errc code) const;
    // The messages of the errors with this code.
    std::vector<std::string> messages(changefeed::errc code) const;

private:
    mutable std::mutex mu_;
    std::vector<changefeed::ErrorInfo> seen_;
};

// Collects what a callback subscription delivers.
class ChangeSink {
public:
    changefeed::ChangeCallback callback();
    std::vector<changefeed::Change> all() const;
    std::vector<std::string> ids() const;
    bool has(const std::string& id) const;

private:
    mutable std::mutex mu_;
    std::vector<changefeed::Change> got_;
};

}  // namespace cftest
