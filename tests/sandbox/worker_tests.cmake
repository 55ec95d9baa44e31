# envforge-worker suites: they run the real worker binary (built beside them in bin/).
envforge_add_test(worker_analyze_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/worker_analyze_test.cc
  LIBS envforge_base
  TIMEOUT 120)
add_dependencies(worker_analyze_test envforge-worker)

envforge_add_test(worker_zygote_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/worker_zygote_test.cc ${PROJECT_SOURCE_DIR}/sandbox/internal/wire.cc
  LIBS envforge_base
  TIMEOUT 600)
add_dependencies(worker_zygote_test envforge-worker)

envforge_add_test(worker_hardening_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/worker_hardening_test.cc ${PROJECT_SOURCE_DIR}/sandbox/internal/wire.cc
  LIBS envforge_base
  TIMEOUT 300)
add_dependencies(worker_hardening_test envforge-worker)
