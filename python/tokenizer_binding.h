// envforge.Tokenizer: the engine's byte-level BPE tokenizer (inference/tokenizer.h) from Python,
// the same ids the embedded engine reads and writes.
//
//   tok = envforge.Tokenizer("data/models/policy-small")     # tokenizer.json, or a directory with one
//   ids = tok.encode(text)                  # list[int]; no BOS added; special-token text -> its id
//   tok.decode(ids) == text                 # for every text (Decode(Encode(s)) == s)
//   tok.vocab_size, tok.bos_id, tok.eos_id, tok.token_to_id("<｜User｜>")  # int | None
//
// Tokenizer(path): path names a tokenizer.json or a directory holding one (tokenizer_config.json
// beside it names BOS/EOS). A missing file, bad JSON or an unsupported tokenizer raises ValueError
// with the loader's message.
// encode(text, parse_special=True) -> list[int]: with parse_special, added tokens written in the
//   text (BOS, EOS, <｜User｜>, ...) become their ids; without, they are encoded as ordinary text.
// decode(ids, skip_special=False) -> str: the tokens' bytes as UTF-8; bytes that do not form
//   UTF-8 (a sequence cut inside a character) become U+FFFD. Unknown ids decode to "".
// encode and decode release the GIL: threads may encode concurrently (the tokenizer is immutable).
#pragma once

#include <pybind11/pybind11.h>

namespace envforge::python {

void DefineTokenizer(pybind11::module_& module);

}  // namespace envforge::python
