// A JetStream stream as changefeed makes one: the publisher when it creates
// its streams, the NATS suites when they prepare a broker.
#pragma once

#include <nats/nats.h>

#include <string>
#include <utility>
#include <vector>

namespace changefeed::nats_stream {

// The configuration of a file-stored stream taking `subjects`, for
// js_AddStream; it holds the C strings the configuration points to.  Callers
// set the other fields (duplicate window, limits) on `config`.
class Config {
public:
    Config(std::string name, std::vector<std::string> subjects)
        : name_(std::move(name)), subjects_(std::move(subjects)) {
        for (const auto& s : subjects_) subject_ptrs_.push_back(s.c_str());
        jsStreamConfig_Init(&config);
        config.Name = name_.c_str();
        config.Subjects = subject_ptrs_.data();
        config.SubjectsLen = static_cast<int>(subject_ptrs_.size());
        config.Storage = js_FileStorage;
    }
    Config(const Config&) = delete;
    Config& operator=(const Config&) = delete;

    jsStreamConfig config;

private:
    std::string name_;
    std::vector<std::string> subjects_;
    std::vector<const char*> subject_ptrs_;
};

// Creates the stream; `code` tells the server's reason when it refused.
inline natsStatus add(jsCtx* js, Config& c, jsErrCode* code) {
    jsStreamInfo* si = nullptr;
    natsStatus s = js_AddStream(&si, js, &c.config, nullptr, code);
    if (s == NATS_OK) jsStreamInfo_Destroy(si);
    return s;
}

}  // namespace changefeed::nats_stream
