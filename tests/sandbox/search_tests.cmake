# Owner: the search environments. Packing the fixture (tests/fixtures/search_env, its corpus built
# from tests/fixtures/search) and search sessions through the SessionManager (the real
# envforge-worker runs beside them).
envforge_add_test(sandbox_search_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/manager_search_test.cc
  LIBS envforge_sandbox envforge_search
  LABELS integration
  TIMEOUT 180)
if(TARGET envforge-worker)
  add_dependencies(sandbox_search_test envforge-worker)
endif()

# Synthesized search environments (issue 15): questions from the fixture corpus packed with their
# solution paths, solved in real sessions by answer and by solution path; failed packs.
envforge_add_test(sandbox_search_synth_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/search_synth_test.cc
  LIBS envforge_sandbox envforge_search
  LABELS integration
  TIMEOUT 180)
if(TARGET envforge-worker)
  add_dependencies(sandbox_search_synth_test envforge-worker)
endif()
