// envforge.model_logits: the embedded engine's logits (inference/model.h) for a token sequence, so
// a training forward in PyTorch can be checked against the engine that will play the model.
//
//   logits = envforge.model_logits("data/models/policy-small", ids)          # DSA
//   dense = envforge.model_logits("data/models/policy-small", ids, dense=True)
//   logits.shape == (len(ids), vocab_size); logits.dtype == numpy.float32
//
// model_logits(model_dir, tokens, dense=False) -> numpy.ndarray[float32], shape [len(tokens), vocab]
//   Loads the model in model_dir (config.json + safetensors; its tokenizer is not needed) on the
//   CPU, runs one prefill of `tokens` into a fresh KV cache with ForwardOptions::all_logits and
//   returns row i = the logits after tokens[0..i] (the last row is what generation samples the
//   next token from). dense=True ignores the lightning indexer (ModelOptions::dense_attention):
//   every query attends to all earlier tokens, which equals DSA while a sequence has at most
//   index_topk tokens. tokens: a list (or 1-D array) of ints; nothing is prepended (pass the BOS
//   id yourself). An empty list, an id outside [0, vocab) or a model that does not load raises
//   ValueError with the engine's message. Runs with the GIL released.
#pragma once

#include <pybind11/pybind11.h>

namespace envforge::python {

void DefineModel(pybind11::module_& module);

}  // namespace envforge::python
