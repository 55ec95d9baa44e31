# Jupyter client and kernel suites: the protocol against the real ipykernel in its sandbox.
envforge_add_test(jupyter_protocol_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/jupyter_protocol_test.cc
  LIBS envforge_sandbox_jupyter
  TIMEOUT 120)
envforge_add_test(jupyter_kernel_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/jupyter_kernel_test.cc
  LIBS envforge_sandbox_jupyter ${ENVFORGE_ZMQ_LIB}
  TIMEOUT 600)
target_include_directories(jupyter_kernel_test SYSTEM PRIVATE ${ENVFORGE_CPPZMQ_INCLUDE})
envforge_add_test(jupyter_pool_test
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/jupyter_pool_test.cc
  LIBS envforge_sandbox_jupyter
  TIMEOUT 600)
