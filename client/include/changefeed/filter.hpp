// Typed predicates over a document, compiled to a server-side SQL/JSON path
// with the values passed as variables -- user values are never spliced into
// the path text, so no value can change what the filter means.
//
//   using changefeed::field;
//   auto f = field("status") == "open" && field("total") >= 100
//         && field("address", "city").in({"Oslo", "Bergen"}) && field("vip").exists();
//
// Semantics are those of jsonb_path_match() in lax mode: a comparison with a
// missing field is false (so is `!=`), and a field holding an array matches
// when any element does.  Values compared must be scalars (string, number,
// bool, null).
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_from.hpp>

#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace changefeed {

class Predicate {
public:
    struct Node;
    explicit Predicate(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
    const Node& node() const { return *node_; }

    friend Predicate operator&&(const Predicate& a, const Predicate& b);
    friend Predicate operator||(const Predicate& a, const Predicate& b);
    friend Predicate operator!(const Predicate& a);

private:
    std::shared_ptr<const Node> node_;
};

// A path of object keys from the document's root.  Each key is taken as is:
// field("a.b") is the key "a.b", field("a", "b") the key b inside a.
class Field {
public:
    explicit Field(std::vector<std::string> path);

    Predicate eq(boost::json::value v) const;
    Predicate ne(boost::json::value v) const;
    Predicate lt(boost::json::value v) const;
    Predicate le(boost::json::value v) const;
    Predicate gt(boost::json::value v) const;
    Predicate ge(boost::json::value v) const;
    // Equal to one of the values (an empty list matches nothing).
    Predicate in(std::vector<boost::json::value> values) const;
    Predicate in(std::initializer_list<boost::json::value> values) const {
        return in(std::vector<boost::json::value>(values));
    }
    // The field is present (with any value, null included).
    Predicate exists() const;

    const std::vector<std::string>& path() const { return path_; }

private:
    std::vector<std::string> path_;
};

template <class... Keys>
Field field(Keys&&... keys) {
    return Field(std::vector<std::string>{std::string(std::forward<Keys>(keys))...});
}

// `field(...) OP value` for any value boost::json::value_from() accepts
// (strings, numbers, bools, nullptr).
// clang-format 14 misreads `T&&` in a requires-expression, and these lines
// are a table.
// clang-format off
template <class T>
concept FilterValue = !std::is_same_v<std::remove_cvref_t<T>, Field> &&
                      requires(T&& v) { boost::json::value_from(std::forward<T>(v)); };

template <FilterValue T> Predicate operator==(const Field& f, T&& v) { return f.eq(boost::json::value_from(std::forward<T>(v))); }
template <FilterValue T> Predicate operator!=(const Field& f, T&& v) { return f.ne(boost::json::value_from(std::forward<T>(v))); }
template <FilterValue T> Predicate operator<(const Field& f, T&& v) { return f.lt(boost::json::value_from(std::forward<T>(v))); }
template <FilterValue T> Predicate operator<=(const Field& f, T&& v) { return f.le(boost::json::value_from(std::forward<T>(v))); }
template <FilterValue T> Predicate operator>(const Field& f, T&& v) { return f.gt(boost::json::value_from(std::forward<T>(v))); }
template <FilterValue T> Predicate operator>=(const Field& f, T&& v) { return f.ge(boost::json::value_from(std::forward<T>(v))); }
// clang-format on

// What is sent to the server: changefeed.read(..., filter => jsonpath, filter_vars => vars).
struct CompiledFilter {
    std::string jsonpath;
    boost::json::object vars;
};

// Throws Error(invalid_option) for an empty path or a non-scalar value.
CompiledFilter compile(const Predicate& p);

}  // namespace changefeed
