# inference/ sources of the backends area (relative to inference/): the openai backend and its
# wire format (libcurl; linked in inference/CMakeLists.txt).
list(APPEND ENVFORGE_INFERENCE_SOURCES
  openai_backend.cc
  internal/openai_wire.cc
)
