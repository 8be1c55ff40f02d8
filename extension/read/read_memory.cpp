// Memory a reading backend keeps between reads.
//
// A read of thousands of changes uses megabytes: the rows of its page, their
// positions, its result set.  Taken from the statement's memory, they went
// back to malloc when the statement ended, malloc gave them back to the
// kernel, and the next read of a drain faulted every page in again: a sixth
// of a reading backend's time.  Here they come from memory kept as long as
// the backend, up to changefeed.read_memory_kept in all:
//  - the work context, what a read uses while it runs, emptied when it
//    returns;
//  - the results context, where its result set (a tuplestore) lives until the
//    executor ends it after the read returned; emptied at the transaction's
//    end, committed or aborted, when every portal that could still hold one
//    has been dropped or persisted (a result abandoned by an error is freed
//    there too);
//  - a few buffers for the page's large arrays, which a context would give
//    to malloc one by one (chunks over 8 kB).
// Each context's first block, which a reset keeps, grows to what a read
// needed, so a drain's reads of one size take nothing from malloc; after
// kCalmResets resets without growing it is halved, so memory a rare large
// read took goes back.
#include "pg.hpp"
#include "read/read_memory.hpp"
#include "settings.hpp"

namespace {

constexpr Size kMinKeeper = 64 * 1024;
constexpr Size kGrain = 1024 * 1024;  // keepers grow in steps of this
constexpr int kCalmResets = 256;

struct KeptContext {
    const char *name;
    MemoryContext cxt;  // null until used, or after a resize
    Size keeper;        // its first block, kept by a reset
    int calm;           // resets in a row that needed no more than the keeper
    bool used;          // since the last reset
};

KeptContext work = {"changefeed read work", NULL, kMinKeeper, 0, false};
KeptContext results = {"changefeed read results", NULL, kMinKeeper, 0, false};
bool work_in_use = false;

struct KeptBuffer {
    void *buf;  // in TopMemoryContext; null: none kept
    Size size;
    bool in_use;
};
KeptBuffer buffers[kReadBuffers];

Size limit_bytes(void) {
    return (Size)changefeed_read_memory_kept * 1024;
}

Size kept_total(void) {
    Size total = (work.cxt != NULL ? work.keeper : 0) + (results.cxt != NULL ? results.keeper : 0);
    for (const KeptBuffer &b : buffers) total += b.buf != NULL ? b.size : 0;
    return total;
}

MemoryContext context_of(KeptContext *k) {
    if (k->cxt == NULL)
        k->cxt = AllocSetContextCreateInternal(TopMemoryContext, k->name, k->keeper, 64 * 1024,
                                               Max(k->keeper, ALLOCSET_DEFAULT_MAXSIZE));
    k->used = true;
    return k->cxt;
}

// Empties k's context, its keeper resized to what the reads since the last
// reset needed (as far as the limit allows), or halved after a calm spell.
void reset(KeptContext *k) {
    if (k->cxt == NULL || !k->used) return;
    k->used = false;
    const Size used = MemoryContextMemAllocated(k->cxt, true);  // the keeper, and blocks beyond it
    Size want = k->keeper;
    if (used > k->keeper) {
        k->calm = 0;
        want = TYPEALIGN(kGrain, used);
    } else if (++k->calm >= kCalmResets) {
        k->calm = 0;
        want = Max(kMinKeeper, MAXALIGN(k->keeper / 2));
    }
    // Within the limit, also after it was lowered.
    const Size others = kept_total() - k->keeper;
    const Size room = limit_bytes() > others ? limit_bytes() - others : 0;
    if (want > room) want = Max(kMinKeeper, TYPEALIGN_DOWN(kGrain, room));
    if (want == k->keeper) {
        MemoryContextReset(k->cxt);
        return;
    }
    MemoryContextDelete(k->cxt);
    k->cxt = NULL;
    k->keeper = want;
}

void forget_buffers(void) {
    for (KeptBuffer &b : buffers) {
        if (b.buf != NULL) pfree(b.buf);
        b = KeptBuffer{NULL, 0, false};
    }
}

void on_xact(XactEvent event, void *) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PREPARE:
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            // A read an error ended left its work and its buffers taken.
            if (work_in_use) {
                work_in_use = false;
                if (work.cxt != NULL) MemoryContextReset(work.cxt);
            }
            for (KeptBuffer &b : buffers) b.in_use = false;
            reset(&results);
            if (limit_bytes() == 0) {  // the limit was lowered to nothing
                forget_buffers();
                KeptContext *both[2] = {&work, &results};
                for (KeptContext *k : both)
                    if (k->cxt != NULL) {
                        MemoryContextDelete(k->cxt);
                        k->cxt = NULL;
                        k->keeper = kMinKeeper;
                    }
            }
            break;
        default: break;
    }
}

}  // namespace

void changefeed_read_memory_init(void) {
    RegisterXactCallback(on_xact, NULL);
}

MemoryContext changefeed_read_work_begin(void) {
    if (work_in_use || limit_bytes() == 0) return NULL;
    work_in_use = true;
    return MemoryContextSwitchTo(context_of(&work));
}

void changefeed_read_work_end(MemoryContext caller) {
    if (caller == NULL) return;  // a read within a read, or nothing kept
    MemoryContextSwitchTo(caller);
    work_in_use = false;
    reset(&work);
}

void changefeed_read_materialize(FunctionCallInfo fcinfo) {
    InitMaterializedSRF(fcinfo, 0);
    if (limit_bytes() == 0) return;
    ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
    MemoryContext caller = MemoryContextSwitchTo(context_of(&results));
    Tuplestorestate *kept = tuplestore_begin_heap((rsinfo->allowedModes & SFRM_Materialize_Random) != 0, false,
                                                  work_mem);
    MemoryContextSwitchTo(caller);
    tuplestore_end(rsinfo->setResult);
    rsinfo->setResult = kept;
}

void *changefeed_read_buffer_take(ChangefeedReadBuffer which, Size size) {
    KeptBuffer &b = buffers[which];
    size = Max(size, 1);
    if (b.in_use || limit_bytes() == 0) return palloc_extended(size, MCXT_ALLOC_HUGE);
    if (b.buf == NULL) {
        b.buf = MemoryContextAllocHuge(TopMemoryContext, size);
        b.size = size;
    } else if (b.size < size) {
        b.buf = repalloc_huge(b.buf, size);
        b.size = size;
    }
    b.in_use = true;
    return b.buf;
}

void *changefeed_read_buffer_grow(ChangefeedReadBuffer which, void *buf, Size size) {
    KeptBuffer &b = buffers[which];
    void *grown = repalloc_huge(buf, size);
    if (b.in_use && buf == b.buf) {  // the kept one moved: an error now must not leave it dangling
        b.buf = grown;
        b.size = size;
    }
    return grown;
}

void changefeed_read_buffer_give_back(ChangefeedReadBuffer which, void *buf) {
    KeptBuffer &b = buffers[which];
    if (!b.in_use || buf != b.buf) {
        pfree(buf);  // not the kept one: a read within a read took its own
        return;
    }
    b.in_use = false;
    if (kept_total() > limit_bytes()) {
        pfree(b.buf);
        b.buf = NULL;
        b.size = 0;
    }
}
