# tessera_use_shared_cxx_runtime(): every library and program of this build links the
# shared C++ runtime, as the LibTorch they all load does.
#
# A GCC that finds no libstdc++.so to link against (a relocated toolchain without
# the development symlink, e.g. /opt/gcc on some CUDA images) silently links
# libstdc++.a into what it builds. In a process that also has libstdc++.so.6 (LibTorch's
# runtime: every torch process, every program linking LibTorch) the two runtimes' locale
# state then clash, and the first stream that formats a number on the other runtime's side
# (an error message, c10's operator<< for a device or dtype) crashes the process. Link the
# process's runtime by name then, and refuse to build where that is not possible.
# Call it at the top level, before the targets are declared.
#
# First on every link line as well: LibTorch's pip builds export copies of std::filesystem
# functions (from their toolchain's static libstdc++_nonshared), and a program that names
# libtorch before libstdc++.so.6 among its needed libraries binds its own std::filesystem
# calls to those copies, which crash (remove_all jumps to address 0). With the runtime needed
# first, the dynamic linker finds its definitions before LibTorch's.
macro(tessera_use_shared_cxx_runtime)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_link_options("LINKER:--push-state,--no-as-needed,-l:libstdc++.so.6,--pop-state")
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so
                    OUTPUT_VARIABLE _tessera_libstdcxx OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT IS_ABSOLUTE "${_tessera_libstdcxx}")
      if(CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
        message(FATAL_ERROR "${CMAKE_CXX_COMPILER} has no libstdc++.so to link against (it would embed "
                            "libstdc++.a, which crashes beside LibTorch): use another compiler (CXX=...)")
      endif()
      message(STATUS "tessera: ${CMAKE_CXX_COMPILER} has no libstdc++.so; everything links libstdc++.so.6 by name")
      add_link_options($<$<LINK_LANGUAGE:CXX>:-nostdlib++> $<$<LINK_LANGUAGE:CUDA>:-nostdlib++>)
      # Last on every link line, where g++ puts its own: -nostdlib++ drops libm with libstdc++, and
      # a library early on the line is dropped (--as-needed) before the static archives that need it.
      set(CMAKE_CXX_STANDARD_LIBRARIES "${CMAKE_CXX_STANDARD_LIBRARIES} -l:libstdc++.so.6 -lm")
      set(CMAKE_CUDA_STANDARD_LIBRARIES "${CMAKE_CUDA_STANDARD_LIBRARIES} -l:libstdc++.so.6 -lm")
    endif()
  endif()
endmacro()
