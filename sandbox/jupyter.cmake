# Owner: the interpreter environments. Our own Jupyter client (ZeroMQ, HMAC-SHA256 signing) and
# sandboxed ipykernel processes. ZeroMQ and libseccomp stay inside the .cc files.
add_library(envforge_sandbox_jupyter STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/message_signer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/jupyter_message.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/kernel_connection.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/execute_outputs.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/kernel_client.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/kernel_cgroup.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/kernel_janitor.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/kernel_launcher.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/kernel_process.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/kernel_pool.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/jupyter/kernel_session.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/seccomp_rules.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/sandbox_exec.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/internal/cgroup_files.cc
)
target_include_directories(envforge_sandbox_jupyter SYSTEM PRIVATE ${ENVFORGE_CPPZMQ_INCLUDE} ${ENVFORGE_SECCOMP_INCLUDE})
target_link_libraries(envforge_sandbox_jupyter
  PUBLIC envforge_base envforge_toolsets
  PRIVATE ${ENVFORGE_ZMQ_LIB} ${ENVFORGE_SECCOMP_LIB} Threads::Threads)
envforge_target_warnings(envforge_sandbox_jupyter)

# Owner: the code environments. Instances, repository snapshots, code bundles and sandboxed
# commands (bubblewrap like the kernels, sharing their cgroup, janitor and seccomp program).
add_library(envforge_sandbox_code STATIC
  ${CMAKE_CURRENT_SOURCE_DIR}/code/code_instance.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/code/repo_snapshot.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/code/code_bundle.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/code/sandboxed_command.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/code/code_workspace.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/code/code_grading.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/code/repo_source.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/code/tree_copy.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/code/working_copy_pool.cc
)
target_include_directories(envforge_sandbox_code SYSTEM PRIVATE ${ENVFORGE_SECCOMP_INCLUDE})
target_link_libraries(envforge_sandbox_code
  PUBLIC envforge_base envforge_toolsets envforge_sandbox_bundle
  PRIVATE envforge_sandbox_jupyter envforge_junit ${ENVFORGE_SECCOMP_LIB} Threads::Threads)
envforge_target_warnings(envforge_sandbox_code)
