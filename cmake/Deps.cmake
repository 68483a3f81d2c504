# Third-party dependencies. All come from Debian packages (scripts/setup.sh installs them).
# In portable builds static archives are preferred so the binary needs only libc, the
# CUDA driver and libcublasLt.so.13 on the target machine.
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)

if(TANDEM_PORTABLE)
  set(_tandem_libsuffix .a)
else()
  set(_tandem_libsuffix .a .so)
endif()

function(tandem_find_lib var name header)
  set(CMAKE_FIND_LIBRARY_SUFFIXES ${_tandem_libsuffix})
  find_library(${var}_LIB NAMES ${name} REQUIRED)
  find_path(${var}_INC NAMES ${header} REQUIRED)
  add_library(dep::${name} UNKNOWN IMPORTED GLOBAL)
  set_target_properties(dep::${name} PROPERTIES IMPORTED_LOCATION ${${var}_LIB}
                        INTERFACE_INCLUDE_DIRECTORIES ${${var}_INC})
endfunction()

tandem_find_lib(PCRE2 pcre2-8 pcre2.h)
set_property(TARGET dep::pcre2-8 PROPERTY INTERFACE_COMPILE_DEFINITIONS PCRE2_CODE_UNIT_WIDTH=8 PCRE2_STATIC)
tandem_find_lib(UTF8PROC utf8proc utf8proc.h)
set_property(TARGET dep::utf8proc PROPERTY INTERFACE_COMPILE_DEFINITIONS UTF8PROC_STATIC)
tandem_find_lib(SQLITE3 sqlite3 sqlite3.h)

# fmt and spdlog header-only: Debian ships no static archives of them.
find_path(SPDLOG_INC spdlog/spdlog.h REQUIRED)
add_library(dep::spdlog INTERFACE IMPORTED GLOBAL)
target_compile_definitions(dep::spdlog INTERFACE SPDLOG_HEADER_ONLY FMT_HEADER_ONLY SPDLOG_FMT_EXTERNAL)

# Boost (Beast/Asio are header-only).
find_path(BOOST_INC boost/beast.hpp REQUIRED)
add_library(dep::boost INTERFACE IMPORTED GLOBAL)
target_include_directories(dep::boost SYSTEM INTERFACE ${BOOST_INC})

# CUDA: compiled whenever nvcc exists, so CUDA code cannot rot unseen.
set(TANDEM_HAVE_CUDA OFF)
if(TANDEM_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES ${TANDEM_CUDA_ARCHS})
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc 13's C++20 flag. Device code is C++17 and includes
    # only C++17 headers (no fmt: its consteval checks fail under nvcc).
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(TANDEM_HAVE_CUDA ON)
    message(STATUS "tandem: CUDA backend ON (${CMAKE_CUDA_COMPILER_VERSION}, archs ${TANDEM_CUDA_ARCHS})")
  else()
    message(STATUS "tandem: nvcc not found, CPU-only build")
  endif()
endif()

if(TANDEM_PORTABLE)
  add_link_options(-static-libstdc++ -static-libgcc)
endif()
