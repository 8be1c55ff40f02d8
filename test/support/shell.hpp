// Running commands from a test: shell quoting and reading what they wrote.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace cftest {

// `s` as one word of a POSIX shell command line.
inline std::string quote(const std::string& s) {
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
}

// The whole of a file (empty when it cannot be read).
inline std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

}  // namespace cftest
