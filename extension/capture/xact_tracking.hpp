// Capture-side transaction tracking (extension/capture/xact_tracking.cpp).  Include
// after pg.hpp.
#pragma once

void changefeed_xact_tracking_init(void);
// Notes that this transaction captured a row of `collection_id`.
void changefeed_note_capture(int32 collection_id);
// Whether this transaction captured any row.
bool changefeed_xact_captured(void);
