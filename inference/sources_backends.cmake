# inference/ sources of the Backend seam (relative to inference/): the factory and the backends
# (the openai backend links libcurl; see inference/CMakeLists.txt).
list(APPEND ENVFORGE_INFERENCE_SOURCES
  backend.cc
  scripted_backend.cc
  batch_engine.cc
  embedded_backend.cc
  openai_backend.cc
  internal/openai_wire.cc
)
