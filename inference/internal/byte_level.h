// GPT-2's byte-level alphabet: every byte has a printable stand-in code point, so BPE vocabularies
// can hold arbitrary bytes as text. Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand
// for themselves; the other 68 bytes map, in byte order, to U+0100, U+0101, ...
#pragma once

#include <array>
#include <cstdint>

namespace envforge::inference::internal {

struct ByteAlphabet {
  std::array<char32_t, 256> byte_to_char{};
  // Inverse, indexed by code point below 0x144; -1 for code points outside the alphabet.
  std::array<int16_t, 0x144> char_to_byte{};
};

inline constexpr ByteAlphabet MakeByteAlphabet() {
  ByteAlphabet alphabet;
  for (auto& entry : alphabet.char_to_byte) entry = -1;
  char32_t next_extra = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const char32_t c = printable ? static_cast<char32_t>(b) : next_extra++;
    alphabet.byte_to_char[b] = c;
    alphabet.char_to_byte[c] = static_cast<int16_t>(b);
  }
  return alphabet;
}

inline constexpr ByteAlphabet kByteAlphabet = MakeByteAlphabet();

// The byte a code point of the alphabet stands for, or -1.
inline int ByteOfChar(char32_t c) { return c < kByteAlphabet.char_to_byte.size() ? kByteAlphabet.char_to_byte[c] : -1; }

}  // namespace envforge::inference::internal
