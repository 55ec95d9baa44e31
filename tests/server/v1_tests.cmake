# tests of the OpenAI-compatible /v1 endpoint: the real `envforge serve` binary with a scripted
# backend and with the tiny embedded model, over real sockets on 127.0.0.1 (the `openai` npm
# client: npm_tests.cmake).
envforge_add_test(server_v1_test
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_v1_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/transport_v1_embedded_test.cc
  LIBS envforge_server
  LABELS integration
  TIMEOUT 600)
add_dependencies(server_v1_test envforge envforge-worker)
