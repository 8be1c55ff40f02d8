// Change-feed processors: leased, checkpointed readers of a collection's feed.
//
//   auto p = changefeed::make_processor(collection, "billing-projection",
//       [](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) { ... });
//   p.start();  // nothing is read before this
//   ...
//   p.stop();   // or let the destructor do it; releases the leases at once
//
// Delivery is at least once: a batch is checkpointed only after the handler
// returned, and a handler that throws gets the same changes again.
#pragma once

#include <changefeed/collection.hpp>
#include <changefeed/handler.hpp>
#include <changefeed/processor_names.hpp>
#include <changefeed/processor_options.hpp>
#include <changefeed/projection.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace changefeed {

class Processor;

namespace detail {
struct ProcessorImpl;
// Stops and frees a processor's implementation -- or, from inside its
// handler, hands it to its own thread, which frees it once the handler returned.
struct DisposeProcessor {
    void operator()(ProcessorImpl* impl) const noexcept;
};
// What each provider's make_processor wraps its implementation in.
Processor processor_of(std::unique_ptr<ProcessorImpl> impl);
}  // namespace detail

// A processor, made by make_processor (PostgreSQL or in-memory).
class Processor {
public:
    // Stops.  Destroying a processor from inside its own handler is allowed:
    // it asks the processor to stop and returns at once; once the handler has
    // returned, the processor's own thread finishes the stop (stores the last
    // checkpoints, releases the leases, tells on_state_change `stopped`) and
    // frees it.  Whatever the handler and the callbacks use must outlive that.
    ~Processor();
    Processor(Processor&&) noexcept;
    // Stops the processor assigned over, as the destructor does.
    Processor& operator=(Processor&&) noexcept;
    Processor(const Processor&) = delete;
    Processor& operator=(const Processor&) = delete;

    // Checks the collection, creates the leases on the processor's first start
    // and begins reading in the background.  Throws Error: already_started,
    // collection_not_found, collection_not_enabled, connection_failed,
    // permission_denied (the role may not SELECT the table, is not a member of
    // changefeed_processor, is bound to another tenant, or the processor name
    // belongs to another role on this collection), invalid_option (a tenant on
    // a collection without a tenant column), instance_name_in_use (another
    // live instance runs under this instance name), history_lost /
    // malformed_position / foreign_position (start_time, start_position),
    // read_only_server (the collection's connection reached a standby:
    // connect the processor to the primary), ...
    void start();
    // Stops reading (waits for a running handler, whose stop token is
    // signalled) and releases the leases.  Idempotent.  Called from inside the
    // handler it only asks to stop; the leases are released by the next
    // stop() from outside or by the destructor.
    // A processor whose table is dropped or disabled stops on its own
    // (on_error is told with collection_not_found / collection_not_enabled).
    void stop();

    State state() const;
    const std::string& name() const;
    const std::string& instance_name() const;
    // The ranges this instance holds leases on right now.
    std::vector<int> owned_ranges() const;
    // A projector processor's counters (zero for other shapes).
    ProjectionStats projection_stats() const;

    // Returns once this processor (every instance of its name, whichever
    // holds each range) has handled and checkpointed every change committed
    // before `position` -- for a TransactionalHandler, its projection
    // committed: read-your-writes after a write whose position the writer
    // took (changefeed.current_position() in its next statement; on the
    // in-memory provider InMemoryCollection::current_position()).  Throws
    // Error: wait_timed_out after `timeout` (its message names the ranges
    // behind), history_lost, malformed_position / foreign_position,
    // processor_not_found (the name never started), connection_failed.
    // Needs no running instance here: it watches the stored checkpoints.
    void wait_for(const std::string& position, std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
    // wait_for() the position of now: everything committed before the call.
    void wait_until_caught_up(std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

private:
    friend Processor detail::processor_of(std::unique_ptr<detail::ProcessorImpl>);
    explicit Processor(std::unique_ptr<detail::ProcessorImpl> impl);
    std::unique_ptr<detail::ProcessorImpl, detail::DisposeProcessor> impl_;
};

// Processor::wait_for() from a process that runs no instance of the
// processor -- a service that wrote and now reads the projection another
// service maintains: `processor` as its processors are made with, `tenant`
// as their ProcessorOptions::tenant (empty: none).  The same errors; the role
// connecting needs what changefeed.wait_for() needs (as for changefeed.lag():
// the processor's role, the table's owner or an admin).
void wait_for(const Collection& collection, const std::string& processor, const std::string& position,
              std::chrono::milliseconds timeout = std::chrono::seconds(30), const std::string& tenant = {});

// Makes a processor of `collection`'s feed (the options' type says which)
// that runs `handler`.  Throws Error(processor_name_empty) for an empty name,
// Error(processor_name_too_long) for one over 200 characters (with its tenant
// prefix), Error(instance_name_invalid), Error(invalid_option) for an empty
// handler, a bad interval or an option the handler's shape does not take.
// Does not connect.  The in-memory provider has the same (in_memory.hpp).
Processor make_processor(Collection collection, std::string name, ProcessorHandler handler, FeedOptions options = {});

}  // namespace changefeed
