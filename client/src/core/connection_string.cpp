#include "core/connection_string.hpp"

#include <changefeed/error.hpp>

#include <cctype>
#include <cstddef>
#include <optional>

namespace changefeed::detail {

namespace {

constexpr const char* kKeyword = "changefeed_pooler";

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

bool is_uri(const std::string& s) { return s.rfind("postgresql://", 0) == 0 || s.rfind("postgres://", 0) == 0; }

// Reads a key=value string as libpq does (a value quoted in '...' or bare up
// to a space, backslash escaping the next character) and cuts the keyword's
// pair out; its value goes into `value`.
std::string cut_from_pairs(const std::string& s, std::optional<std::string>& value) {
    std::string kept;
    std::size_t i = 0;
    while (i < s.size()) {
        const std::size_t start = i;
        while (i < s.size() && is_space(s[i])) ++i;
        const std::size_t key_start = i;
        while (i < s.size() && !is_space(s[i]) && s[i] != '=') ++i;
        const std::string key = s.substr(key_start, i - key_start);
        while (i < s.size() && is_space(s[i])) ++i;
        if (i >= s.size() || s[i] != '=') {  // not ours to judge: libpq reports it
            kept += s.substr(start);
            break;
        }
        ++i;
        while (i < s.size() && is_space(s[i])) ++i;
        std::string v;
        if (i < s.size() && s[i] == '\'') {
            for (++i; i < s.size() && s[i] != '\''; ++i) {
                if (s[i] == '\\' && i + 1 < s.size()) ++i;
                v += s[i];
            }
            if (i < s.size()) ++i;
        } else {
            for (; i < s.size() && !is_space(s[i]); ++i) {
                if (s[i] == '\\' && i + 1 < s.size()) ++i;
                v += s[i];
            }
        }
        if (key == kKeyword) value = v;
        else kept += s.substr(start, i - start);
    }
    return kept;
}

// The same for a URI's query parameters.
std::string cut_from_uri(const std::string& s, std::optional<std::string>& value) {
    const std::size_t q = s.find('?');
    if (q == std::string::npos) return s;
    std::string kept = s.substr(0, q), params;
    std::size_t i = q + 1;
    while (i <= s.size()) {
        std::size_t end = s.find('&', i);
        if (end == std::string::npos) end = s.size();
        const std::string param = s.substr(i, end - i);
        const std::size_t eq = param.find('=');
        if (eq != std::string::npos && param.substr(0, eq) == kKeyword) value = param.substr(eq + 1);
        else if (!param.empty()) params += (params.empty() ? "" : "&") + param;
        i = end + 1;
    }
    return params.empty() ? kept : kept + "?" + params;
}

}  // namespace

ConnectionTarget connection_target(const std::string& conninfo) {
    ConnectionTarget t;
    std::optional<std::string> value;
    t.libpq = is_uri(conninfo) ? cut_from_uri(conninfo, value) : cut_from_pairs(conninfo, value);
    if (!value) {
        t.libpq = conninfo;  // untouched, byte for byte
        return t;
    }
    if (*value == "transaction") t.transaction_pooler = true;
    else if (*value != "session" && *value != "none")
        throw Error(errc::invalid_option, "changefeed_pooler must be transaction, session or none, not \"" + *value +
                                              "\": transaction for a pooler in transaction mode (PgBouncer "
                                              "pool_mode=transaction), else leave it out");
    return t;
}

bool through_transaction_pooler(const std::string& conninfo) { return connection_target(conninfo).transaction_pooler; }

}  // namespace changefeed::detail
