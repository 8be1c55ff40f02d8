// Exact numbers: exact_numbers() and the slots of core/exact_json.hpp.
#include "core/exact_json.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <charconv>
#include <cstdint>

namespace changefeed {
namespace {

bool number_char(char c) { return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'; }

// Whether a number token keeps its value as a 64-bit integer.
bool fits_integer(std::string_view n) {
    if (n.find_first_of(".eE") != std::string_view::npos) return false;
    const char* end = n.data() + n.size();
    if (n.front() == '-') {
        std::int64_t i;
        return std::from_chars(n.data(), end, i).ec == std::errc();
    }
    std::uint64_t u;
    return std::from_chars(n.data(), end, u).ec == std::errc();
}

}  // namespace

boost::json::value exact_numbers(std::string_view json) {
    // Every number outside a string that is not a 64-bit integer gets quotes;
    // a number's characters never need escaping.
    std::string quoted;
    quoted.reserve(json.size() + 16);
    bool in_string = false;
    for (std::size_t i = 0; i < json.size();) {
        const char c = json[i];
        if (in_string) {
            quoted += c;
            if (c == '\\' && i + 1 < json.size()) quoted += json[++i];
            else if (c == '"') in_string = false;
            ++i;
        } else if (c == '"') {
            in_string = true;
            quoted += c;
            ++i;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            std::size_t end = i;
            while (end < json.size() && number_char(json[end])) ++end;
            const auto token = json.substr(i, end - i);
            if (fits_integer(token)) quoted.append(token);
            else quoted.append("\"").append(token).append("\"");
            i = end;
        } else {
            quoted += c;
            ++i;
        }
    }
    return boost::json::parse(quoted);
}

namespace detail {
namespace {

// A string jsonb cannot hold (PostgreSQL refuses \u0000 in jsonb), so no
// document's content is ever mistaken for a slot.
const std::string current_mark{"\0changefeed:current\0", 20};
const std::string previous_mark{"\0changefeed:previous\0", 21};

// How a slot reads once serialized.
std::string serialized(const std::string& mark) { return boost::json::serialize(boost::json::value(mark)); }

void replace_once(std::string& text, const std::string& slot, const std::string& with) {
    if (const auto at = text.find(slot); at != std::string::npos) text.replace(at, slot.size(), with);
}

}  // namespace

boost::json::value current_slot(const Change& change) {
    if (change.current_json.empty()) return change.current;
    return boost::json::value(current_mark);
}

boost::json::value previous_slot(const Change& change) {
    if (change.previous_json.empty()) return change.previous;
    return boost::json::value(previous_mark);
}

std::string serialize_exact(const boost::json::value& v, const Change& change) {
    static const std::string current_slot_text = serialized(current_mark);
    static const std::string previous_slot_text = serialized(previous_mark);
    std::string text = boost::json::serialize(v);
    if (!change.current_json.empty()) replace_once(text, current_slot_text, change.current_json);
    if (!change.previous_json.empty()) replace_once(text, previous_slot_text, change.previous_json);
    return text;
}

}  // namespace detail
}  // namespace changefeed
