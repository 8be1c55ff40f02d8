// Module entry (extension/module.cpp).  Include after pg.hpp.
#pragma once

namespace changefeed {
// Library loaded through shared_preload_libraries (set in _PG_init).
extern bool preloaded;
}  // namespace changefeed
