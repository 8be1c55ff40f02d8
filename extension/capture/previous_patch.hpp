// The image from before a replace, stored as what differs from the image
// after it (extension/capture/previous_patch.cpp).  Include after pg.hpp.
#pragma once

// At capture: the image to store as `previous` of a replace whose images are
// `current` and `previous` (jsonb Datums): a patch when it is smaller than
// the whole image by a margin, else `previous` itself.
Datum changefeed_previous_patch(Datum current, Datum previous);

// At read: the whole image from before, given the change's logged `current`
// and its stored `previous` (a patch or a whole image); detoasted.
Datum changefeed_previous_whole(Datum current, Datum stored);
