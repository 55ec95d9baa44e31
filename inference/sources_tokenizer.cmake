# inference/ sources of the tokenizer area (relative to inference/).
list(APPEND ENVFORGE_INFERENCE_SOURCES
  chat_format.cc
  tool_call_grammar.cc
  token_constraint.cc
  tokenizer.cc
  internal/bpe_model.cc
  internal/pre_tokenizer.cc
  internal/utf8.cc
)
