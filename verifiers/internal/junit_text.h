// Text clean-up for JUnit reports: ANSI escapes out of names and messages, whitespace collapsed in
// TestIds, messages bounded, absolute paths made independent of where a checkout lives. All
// functions are linear in their input and pure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace envforge::verifiers::internal {

// Removes ANSI escape sequences: CSI (ESC [ params final), OSC (ESC ] ... BEL or ESC \), other
// ESC sequences (ESC, intermediates 0x20-0x2F, one final byte), and pytest's visible rewrite of
// ESC as the four characters "#x1B" when a CSI follows ("#x1B[31m"). A lone trailing ESC goes too.
std::string StripAnsi(std::string_view text);

// A TestId from its parts: runs of ASCII whitespace become one space, both ends are trimmed.
// (ANSI escapes are expected to be gone already.)
std::string CollapseWhitespace(std::string_view text);

// Trims ASCII whitespace at both ends.
std::string_view Trim(std::string_view text);

// Cuts `text` to at most max_bytes, at a UTF-8 character boundary, appending "..." when cut
// (the result may then be up to max_bytes + 3 bytes).
std::string Truncate(std::string_view text, size_t max_bytes);

// The first line of `text`, at most max_bytes (Truncate).
std::string FirstLine(std::string_view text, size_t max_bytes);

// A path as it appears in a TestId: relative paths unchanged (a leading "./" dropped); absolute
// ones relative to source_root when under it, else their last component.
std::string PathForId(std::string_view path, std::string_view source_root);

}  // namespace envforge::verifiers::internal
