#include "commands.hpp"

#include "exit_codes.hpp"

#include <csignal>
#include <cstdlib>

namespace changefeed::cli {
namespace {

volatile std::sig_atomic_t got_signal = 0;

void on_signal(int) { got_signal = 1; }

bool looks_like_position(const std::string& s) {
    return s.size() > 4 && s[0] == 'c' && s[1] == 'f' && std::isdigit(static_cast<unsigned char>(s[2])) &&
           s.find('.') != std::string::npos;
}

}  // namespace

int collection_id(Connection& c, const std::string& table) {
    return std::stoi(c.exec("SELECT (changefeed.collection_of($1::regclass)).id", {table}).get(0, 0));
}

std::optional<std::string> resolve_position(Connection& c, const std::string& table, const std::string& spec,
                                            bool allow_beginning, bool now_as_null) {
    if (spec == "now") {
        if (now_as_null) return std::nullopt;
        return c.exec("SELECT changefeed.current_position()").get(0, 0);
    }
    if (spec == "beginning") {
        if (!allow_beginning)
            throw CliError(exit_usage, "\"beginning\" is not accepted here: give now, a time or a position");
        // Every change still in the log: from what retention last dropped,
        // or from the start of time when it dropped nothing yet.
        return c
            .exec("SELECT changefeed.position_at($1::regclass, coalesce("
                  "  (SELECT max(h.dropped_before) FROM changefeed.horizons h WHERE h.table_name = $1::regclass),"
                  "  '1970-01-01 00:00:00+00'::timestamptz))",
                  {table})
            .get(0, 0);
    }
    if (looks_like_position(spec)) return spec;
    return c.exec("SELECT changefeed.position_at($1::regclass, $2::timestamptz)", {table, spec}).get(0, 0);
}

std::optional<std::string> int_array(const std::vector<int>& ids) {
    if (ids.empty()) return std::nullopt;
    std::string out = "{";
    for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
    return out + "}";
}

void add_processor_arguments(CLI::App& sub, std::string& table, std::string& processor) {
    sub.add_option("table", table, "the enabled table")->required();
    sub.add_option("processor", processor, "the processor name (a tenant's: <tenant>/<name>)")->required();
}

double parse_share(const std::string& text) {
    try {
        std::size_t used = 0;
        double v = std::stod(text, &used);
        std::string rest = text.substr(used);
        if (rest == "%") v /= 100;
        else if (!rest.empty()) throw std::invalid_argument(text);
        if (!(v > 0 && v <= 1)) throw std::out_of_range(text);
        return v;
    } catch (const std::exception&) {
        throw CliError(exit_usage, "a share must be in (0, 1] or a percentage like 50%, not \"" + text + "\"");
    }
}

bool interrupted() { return got_signal != 0; }

void install_interrupt_handler() {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a wait returns at once
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

}  // namespace changefeed::cli
