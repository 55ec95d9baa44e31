# inference/ sources of the loader area (relative to inference/).
list(APPEND ENVFORGE_INFERENCE_SOURCES
  model_config.cc
  safetensors.cc
  model_weights.cc
)
