# tests of the inference backends area: the openai backend against a local Python server
# (tests/inference/openai_test_server.py) over real HTTP.
envforge_add_test(inference_openai_backend_test
  SOURCES openai_backend_test.cc
  LIBS envforge_inference
  LABELS integration python
  TIMEOUT 120)
