# Bundle suites (owner: the bundle work): packing, loading, hashing, on real files.
envforge_add_test(bundle_test
  SOURCES
    ${CMAKE_CURRENT_SOURCE_DIR}/bundle_pack_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/bundle_load_test.cc
    ${CMAKE_CURRENT_SOURCE_DIR}/bundle_hash_test.cc
  LIBS envforge_sandbox_bundle
  LABELS unit
  TIMEOUT 120)
target_compile_definitions(bundle_test PRIVATE ENVFORGE_TEST_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# Packing runs `envforge-worker analyze`; the worker lands beside the test in build/bin.
if(TARGET envforge-worker)
  add_dependencies(bundle_test envforge-worker)
endif()
