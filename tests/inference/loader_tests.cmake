# tests of the inference loader area
envforge_add_test(inference_loader_test
  SOURCES
    loader_config_test.cc
    loader_safetensors_test.cc
    loader_weights_test.cc
    loader_reference_test.cc
  LIBS envforge_inference
  LABELS unit python
  TIMEOUT 120)
