#include "support/recorder.hpp"

#include <thread>

namespace cftest {

int v_of(const changefeed::Change& c) {
    if (const auto* obj = c.current.if_object())
        if (auto it = obj->find("v"); it != obj->end() && it->value().is_string())
            return std::stoi(std::string(it->value().as_string()));
    return -1;
}

changefeed::Handler Recorder::handler(std::chrono::milliseconds delay) {
    return [this, delay](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
        if (delay.count()) std::this_thread::sleep_for(delay);
        add(batch, ctx);
    };
}

void Recorder::add(const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
    std::lock_guard lock(mu_);
    ++batches_;
    if (batch.empty()) empty_ = true;
    for (const auto& c : batch) handled_.push_back({c, ctx});
}

std::vector<Handled> Recorder::all() const {
    std::lock_guard lock(mu_);
    return handled_;
}

std::vector<Delivery> Recorder::deliveries() const {
    std::lock_guard lock(mu_);
    std::vector<Delivery> out;
    for (const auto& h : handled_)
        out.push_back({h.context.instance, h.context.range_id, h.context.lease_epoch, h.change.doc_id, v_of(h.change)});
    return out;
}

std::size_t Recorder::size() const {
    std::lock_guard lock(mu_);
    return handled_.size();
}

std::size_t Recorder::batches() const {
    std::lock_guard lock(mu_);
    return batches_;
}

bool Recorder::empty_batch_seen() const {
    std::lock_guard lock(mu_);
    return empty_;
}

std::map<std::string, int> Recorder::counts() const {
    std::lock_guard lock(mu_);
    std::map<std::string, int> out;
    for (const auto& h : handled_) ++out[h.change.doc_id];
    return out;
}

bool Recorder::has(const std::string& doc_id) const {
    std::lock_guard lock(mu_);
    for (const auto& h : handled_)
        if (h.change.doc_id == doc_id) return true;
    return false;
}

int Recorder::count(const std::string& doc_id) const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& h : handled_) n += h.change.doc_id == doc_id;
    return n;
}

std::size_t Recorder::from_backfill() const {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    for (const auto& h : handled_) n += h.change.from_backfill;
    return n;
}

std::vector<changefeed::Change> Recorder::of(const std::string& doc_id) const {
    std::lock_guard lock(mu_);
    std::vector<changefeed::Change> out;
    for (const auto& h : handled_)
        if (h.change.doc_id == doc_id) out.push_back(h.change);
    return out;
}

std::function<void(const changefeed::ErrorInfo&)> ErrorLog::sink() {
    return [this](const changefeed::ErrorInfo& e) {
        std::lock_guard lock(mu_);
        seen_.push_back(e);
    };
}

std::vector<changefeed::ErrorInfo> ErrorLog::all() const {
    std::lock_guard lock(mu_);
    return seen_;
}

bool ErrorLog::has(changefeed::errc code) const {
    std::lock_guard lock(mu_);
    for (const auto& e : seen_)
        if (e.code == code) return true;
    return false;
}

std::vector<std::string> ErrorLog::messages(changefeed::errc code) const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& e : seen_)
        if (e.code == code) out.push_back(e.message);
    return out;
}

changefeed::ChangeCallback ChangeSink::callback() {
    return [this](const changefeed::Change& c, const changefeed::Context&) {
        std::lock_guard lock(mu_);
        got_.push_back(c);
    };
}

std::vector<changefeed::Change> ChangeSink::all() const {
    std::lock_guard lock(mu_);
    return got_;
}

std::vector<std::string> ChangeSink::ids() const {
    std::vector<std::string> out;
    for (const auto& c : all()) out.push_back(c.doc_id);
    return out;
}

bool ChangeSink::has(const std::string& id) const {
    for (const auto& c : all())
        if (c.doc_id == id) return true;
    return false;
}

}  // namespace cftest
