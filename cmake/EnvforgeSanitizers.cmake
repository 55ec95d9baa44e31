# ENVFORGE_SANITIZE=address,undefined adds the sanitizers to every target compiled after this point.
if(ENVFORGE_SANITIZE)
  string(REPLACE "," ";" _envforge_sanitizers "${ENVFORGE_SANITIZE}")
  foreach(_s IN LISTS _envforge_sanitizers)
    if(NOT _s MATCHES "^(address|undefined)$")
      message(FATAL_ERROR "ENVFORGE_SANITIZE: unsupported sanitizer '${_s}' (use address and/or undefined)")
    endif()
  endforeach()
  # GCC 12 reports false -Wmaybe-uninitialized in <regex> and <variant> under ASan instrumentation.
  add_compile_options(-fsanitize=${ENVFORGE_SANITIZE} -fno-omit-frame-pointer -Wno-maybe-uninitialized)
  add_link_options(-fsanitize=${ENVFORGE_SANITIZE})
endif()
