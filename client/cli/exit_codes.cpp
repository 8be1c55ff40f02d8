#include "exit_codes.hpp"

namespace changefeed::cli {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

ExitCode exit_code_of_sqlstate(const std::string& s) {
    if (s == "42501") return exit_denied;
    if (s == "CF006" || s == "CF019") return exit_history_lost;
    // Missing table, not enabled, extension not installed (its schema or a
    // function missing), processor that never ran.
    if (s == "42P01" || s == "CF002" || s == "3F000" || s == "42883" || s == "CF012" || s == "42704")
        return exit_not_found;
    // CF021: --mode all on a collection that logs keys alone (images => 'keys').
    if (s == "CF003" || s == "CF004" || s == "CF005" || s == "CF011" || s == "CF020" || s == "CF021" || s == "42809" ||
        starts_with(s, "22"))
        return exit_usage;
    if (starts_with(s, "08") || starts_with(s, "28") || s == "3D000" || starts_with(s, "57P")) return exit_connection;
    if (s == "CF010" || s == "CF015" || s == "55P03" || s == "40001" || s == "40P01") return exit_busy;
    return exit_error;
}

}  // namespace changefeed::cli
