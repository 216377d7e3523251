# tessera_link_shared_cxx_runtime(target): make sure a shared library that is loaded
# into other processes (the LibTorch op in Python) links the shared C++ runtime.
#
# A GCC that finds no libstdc++.so to link against (a relocated toolchain without
# the development symlink, e.g. /opt/gcc on some CUDA images) silently links
# libstdc++.a into a shared object. In a process that already has libstdc++.so.6
# (every torch process) the two runtimes' locale state then clash, and the first
# error message that formats a number crashes the process. Link the process's
# runtime by name then, and refuse to build where that is not possible.
function(tessera_link_shared_cxx_runtime target)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
                  OUTPUT_VARIABLE lib OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(IS_ABSOLUTE "${lib}")
    return()
  endif()
  if(CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    message(FATAL_ERROR "${CMAKE_CXX_COMPILER} has no libstdc++.so to link ${target} against (it would embed "
                        "libstdc++.a, which crashes inside torch processes): use another compiler (CXX=...)")
  endif()
  message(STATUS "tessera: ${CMAKE_CXX_COMPILER} has no libstdc++.so; ${target} links libstdc++.so.6 by name")
  target_link_options(${target} PRIVATE -nostdlib++)
  target_link_libraries(${target} PRIVATE -l:libstdc++.so.6)
endfunction()
