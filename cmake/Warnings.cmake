# Project-wide compile settings applied to our own targets through superpoint_rt_settings.
add_library(superpoint_rt_settings INTERFACE)
target_compile_options(superpoint_rt_settings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
  # Bit-exactness: no implicit a*b+c contraction anywhere (HF luma, grid_sample use explicit std::fma where the
  # reference fuses). GCC contracts by default in GNU mode.
  -ffp-contract=off)
if(SUPERPOINT_RT_WERROR)
  target_compile_options(superpoint_rt_settings INTERFACE -Werror)
endif()
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  # The pragmas that silence GCC 12's false positives name -Wmaybe-uninitialized, which clang (the sanitizer and
  # fuzz tree, scripts/test.sh) does not know.
  target_compile_options(superpoint_rt_settings INTERFACE -Wno-unknown-warning-option)
endif()
if(SUPERPOINT_RT_SANITIZE)
  target_compile_options(superpoint_rt_settings INTERFACE -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer
                                                          -fno-sanitize-recover=undefined,float-cast-overflow)
  target_link_options(superpoint_rt_settings INTERFACE -fsanitize=address,undefined,float-cast-overflow)
endif()

# Kernels for one instruction-set level live in files named *_avx2.cpp / *_avxvnni.cpp / *_avx512.cpp / *_avx512vnni.cpp and are compiled for that
# level only; callers pick them at run time (util/cpu.hpp), so the rest of the build stays baseline x86-64.
function(superpoint_rt_isa_flags)
  foreach(f ${ARGN})
    if(f MATCHES "_avx512vnni\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx2;-mfma;-mbmi2")
    elseif(f MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS
        "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx2;-mfma;-mbmi2")
    elseif(f MATCHES "_avxvnni\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mbmi2;-mavxvnni")
    elseif(f MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${f} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mbmi2")
    endif()
  endforeach()
endfunction()
