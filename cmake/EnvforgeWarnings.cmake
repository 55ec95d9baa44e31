# envforge_target_warnings(target): warnings as errors for project code only (never for
# third-party headers, which are included as SYSTEM).
function(envforge_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror -Wshadow=local -Wnon-virtual-dtor
      -Wno-missing-field-initializers>)
endfunction()
