# tests of the inference tokenizer area
envforge_add_test(inference_tokenizer_test SOURCES tokenizer_bpe_test.cc LIBS envforge_inference LABELS inference TIMEOUT 120)
envforge_add_test(inference_tokenizer_regex_test SOURCES tokenizer_regex_test.cc LIBS envforge_inference LABELS inference TIMEOUT 60)
envforge_add_test(inference_chat_format_test SOURCES chat_format_test.cc LIBS envforge_inference LABELS inference TIMEOUT 60)
