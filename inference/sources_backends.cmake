# inference/ sources of the Backend seam (relative to inference/): the factory and the backends.
list(APPEND ENVFORGE_INFERENCE_SOURCES
  backend.cc
  scripted_backend.cc
  batch_engine.cc
  embedded_backend.cc
)
