// The embedded backend ("embedded:MODEL_DIR"): the DSA engine of this process behind
// inference::Backend, with every caller batched into one BatchEngine (inference/batch_engine.h).
//
// Chat requests are rendered with the DSV32 encoding (EncodeChat; tools offered unless
// tool_choice is "none"), tokenized, generated and parsed (ParseCompletion: reasoning, content,
// DSML tool calls; malformed DSML is the choice's parse_error). Raw requests complete
// prompt_text as it is (BOS prepended unless present).
//
// tool_choice "required" or a tool's name decodes under the DSML tool-call grammar
// (tool_call_grammar.h; token_constraint.h masks every token that would leave it), as vLLM's
// guided decoding does for JSON: such a choice always parses into at least one call of an offered
// tool (that tool only, when named) with the properties its schema lists, required ones included,
// unless max_tokens cuts it. InvalidArgument when the tools are not usable for the grammar (none
// offered, a named tool that is not among them). "auto" decodes freely, unless a tool says
// `strict: true` (OpenAI's strict function calling): then under the same grammar with the block
// optional, so a choice is either content alone or content and calls that parse.
//
// Multi-turn reuse (what keeps an agent episode from re-prefilling its conversation): a chat choice
// that ended on EOS or on max_tokens (not on a stop string) gets a cache_handle holding its KV
// cache, its token context and the text it was generated from. A request with continue_from = that handle whose
// messages are the same conversation plus that choice's assistant message plus new messages feeds only the tokens of
// the new messages' rendering (after the choice's last sampled token, which the cache has not seen, and an EOS closing
// a turn cut by max_tokens) into that cache: the conversation's tokens are exactly those the model sampled, never
// re-tokenized. When the conversation does not match (edited history, thinking dropped by a new user message, context
// management), the request prefills from scratch and the handle's cache is dropped. Fresh prompts are shared through
// the engine's prompt cache, so the n episodes of one task prefill their common first prompt once. Handles are kept
// until continued or released, at most kMaxHandles (the oldest are dropped first; continuing a dropped handle just
// prefills).
//
// Keep routing / keep sampling mask (CompletionRequest::record_routing / record_kept_sets; the
// fields and the positions covered are in backend.h, Completion): the engine records them for the
// requests that ask (BatchEngine's EngineRequest switches) and nothing otherwise. A continued turn
// covers the previous turn's last generated token first, since the engine feeds it only then.
//
// Sampling: choice i of a request samples from SampleStream(sampling.seed, i), so a rollout that
// gives each (episode, turn) its own seed is reproducible whatever the batching. Stop strings end
// a choice when its decoded text contains one (the text is cut before it). on_text receives
// decoded pieces, holding back incomplete UTF-8 sequences.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "inference/backend.h"

namespace envforge::inference {

inline constexpr size_t kMaxHandles = 8192;

// Errors: InvalidArgument/NotFound from Model::Load naming the file or field; InvalidArgument when
// the directory has no tokenizer.json.
Result<std::unique_ptr<Backend>> OpenEmbeddedBackend(const std::string& model_dir, const BackendOptions& options);

}  // namespace envforge::inference
