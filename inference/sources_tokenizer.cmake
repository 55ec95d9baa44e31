# inference/ sources of the tokenizer area (relative to inference/).
list(APPEND ENVFORGE_INFERENCE_SOURCES)
