// Records what handlers were given, thread-safely, for assertions.
#pragma once

#include <changefeed/changefeed.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace cftest {

struct Handled {
    changefeed::Change change;
    changefeed::Context context;
};

class Recorder {
public:
    // A handler that records every change it is given.
    changefeed::Handler handler();
    void add(const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx);

    std::vector<Handled> all() const;
    std::size_t size() const;
    std::size_t batches() const;
    bool empty_batch_seen() const;
    // How often each doc id was handled.
    std::map<std::string, int> counts() const;
    bool has(const std::string& doc_id) const;
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
