// The SQLSTATEs of ours raised from C++: every one is here, and its meaning is
// documented once, in the registry extension/sqlstates.sql.  Include
// after pg.hpp.
#pragma once

namespace changefeed {

constexpr int kNoPrimaryKey = MAKE_SQLSTATE('C', 'F', '0', '0', '1');
constexpr int kNotEnabled = MAKE_SQLSTATE('C', 'F', '0', '0', '2');
constexpr int kInvalidOption = MAKE_SQLSTATE('C', 'F', '0', '0', '3');
constexpr int kInvalidPosition = MAKE_SQLSTATE('C', 'F', '0', '0', '4');
constexpr int kForeignPosition = MAKE_SQLSTATE('C', 'F', '0', '0', '5');
constexpr int kOwnChanges = MAKE_SQLSTATE('C', 'F', '0', '0', '9');
constexpr int kDdlRefused = MAKE_SQLSTATE('C', 'F', '0', '1', '3');
constexpr int kWriteRefused = MAKE_SQLSTATE('C', 'F', '0', '1', '4');
constexpr int kNotReplayedYet = MAKE_SQLSTATE('C', 'F', '0', '1', '6');
constexpr int kOtherHistory = MAKE_SQLSTATE('C', 'F', '0', '1', '7');
constexpr int kNoImages = MAKE_SQLSTATE('C', 'F', '0', '2', '1');
constexpr int kNoCommitWakeups = MAKE_SQLSTATE('C', 'F', '0', '2', '2');

}  // namespace changefeed
