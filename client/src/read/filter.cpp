// Compiles predicates to jsonpath.  Keys are written as JSON string literals
// (jsonpath's quoting is JSON's), values become $vN variables.
#include <changefeed/error.hpp>
#include <changefeed/filter.hpp>

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

namespace changefeed {

struct Predicate::Node {
    enum class Kind { compare, in, exists, all, any, negate } kind;
    std::string op;  // compare: == != < <= > >=
    std::vector<std::string> path;
    boost::json::value value;  // compare: the scalar; in: the array
    std::vector<Predicate> children;
};

namespace {

using Node = Predicate::Node;

void check_scalar(const boost::json::value& v) {
    if (v.is_object() || v.is_array())
        throw Error(errc::invalid_option, "filter values must be scalars (string, number, bool or null)");
}

Predicate make(Node n) { return Predicate(std::make_shared<const Node>(std::move(n))); }

std::string path_text(const std::vector<std::string>& path) {
    std::string out = "$";
    for (const auto& key : path) out += "." + boost::json::serialize(boost::json::value(key));
    return out;
}

std::string compile_node(const Node& n, boost::json::object& vars) {
    switch (n.kind) {
    case Node::Kind::compare:
    case Node::Kind::in: {
        std::string var = "v" + std::to_string(vars.size());
        vars[var] = n.value;
        if (n.kind == Node::Kind::in) return "(" + path_text(n.path) + " == $" + var + "[*])";
        return "(" + path_text(n.path) + " " + n.op + " $" + var + ")";
    }
    case Node::Kind::exists: return "exists(" + path_text(n.path) + ")";
    case Node::Kind::all:
    case Node::Kind::any: {
        std::string out = "(";
        for (std::size_t i = 0; i < n.children.size(); ++i) {
            if (i) out += n.kind == Node::Kind::all ? " && " : " || ";
            out += compile_node(n.children[i].node(), vars);
        }
        return out + ")";
    }
    case Node::Kind::negate: return "!(" + compile_node(n.children[0].node(), vars) + ")";
    }
    throw Error(errc::invalid_option, "unknown filter node");
}

}  // namespace

Predicate operator&&(const Predicate& a, const Predicate& b) { return make(Node{Node::Kind::all, {}, {}, {}, {a, b}}); }
Predicate operator||(const Predicate& a, const Predicate& b) { return make(Node{Node::Kind::any, {}, {}, {}, {a, b}}); }
Predicate operator!(const Predicate& a) { return make(Node{Node::Kind::negate, {}, {}, {}, {a}}); }

Field::Field(std::vector<std::string> path) : path_(std::move(path)) {
    if (path_.empty()) throw Error(errc::invalid_option, "a filter field needs at least one key");
}

namespace {
Predicate compare(const Field& f, const char* op, boost::json::value v) {
    check_scalar(v);
    return make(Node{Node::Kind::compare, op, f.path(), std::move(v), {}});
}
}  // namespace

Predicate Field::eq(boost::json::value v) const { return compare(*this, "==", std::move(v)); }
Predicate Field::ne(boost::json::value v) const { return compare(*this, "!=", std::move(v)); }
Predicate Field::lt(boost::json::value v) const { return compare(*this, "<", std::move(v)); }
Predicate Field::le(boost::json::value v) const { return compare(*this, "<=", std::move(v)); }
Predicate Field::gt(boost::json::value v) const { return compare(*this, ">", std::move(v)); }
Predicate Field::ge(boost::json::value v) const { return compare(*this, ">=", std::move(v)); }

Predicate Field::in(std::vector<boost::json::value> values) const {
    boost::json::array arr;
    for (auto& v : values) {
        check_scalar(v);
        arr.push_back(std::move(v));
    }
    return make(Node{Node::Kind::in, "", path_, std::move(arr), {}});
}

Predicate Field::exists() const { return make(Node{Node::Kind::exists, "", path_, nullptr, {}}); }

CompiledFilter compile(const Predicate& p) {
    CompiledFilter out;
    out.jsonpath = compile_node(p.node(), out.vars);
    return out;
}

}  // namespace changefeed
