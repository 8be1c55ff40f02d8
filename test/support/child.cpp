#include "support/child.hpp"

#include <csignal>
#include <spawn.h>
#include <sys/wait.h>

extern char** environ;

namespace cftest {

ChildProcess::ChildProcess(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (args.empty() || posix_spawn(&pid_, args[0].c_str(), nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }

ChildProcess::~ChildProcess() { kill_hard(); }

void ChildProcess::kill_hard() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
}

}  // namespace cftest
