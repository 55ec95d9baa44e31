# tests of the inference tokenizer area
