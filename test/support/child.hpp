// Child processes of a test: started with posix_spawn, killed with SIGKILL
// (never a graceful stop: the tests use them to lose an instance abruptly) and
// reaped by their pid.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace cftest {

class ChildProcess {
public:
    // argv[0] is the program's path.  running() tells whether it started.
    explicit ChildProcess(std::vector<std::string> argv);
    ChildProcess(ChildProcess&& other) noexcept;
    ChildProcess& operator=(ChildProcess&&) = delete;
    ChildProcess(const ChildProcess&) = delete;
    ~ChildProcess();  // kill_hard()

    bool running() const { return pid_ > 0; }
    // SIGKILL, then waits for it to exit.
    void kill_hard();

private:
    pid_t pid_ = -1;
};

#ifdef CF_RUNNER
// A processor instance in a child process (support/processor_runner.cpp):
// processor_runner({conninfo, table, processor, instance, out_file, options...}).
inline ChildProcess processor_runner(std::vector<std::string> args) {
    args.insert(args.begin(), CF_RUNNER);
    return ChildProcess(std::move(args));
}
#endif

}  // namespace cftest
