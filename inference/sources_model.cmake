# inference/ sources of the model area (relative to inference/).
list(APPEND ENVFORGE_INFERENCE_SOURCES
  kv_cache.cc
  model.cc
  sampler.cc
  generator.cc
)
