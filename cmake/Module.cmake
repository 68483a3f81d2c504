# Modules and layers.
#
# Every folder under src/ that holds code is a module: one static library (cli: the tandem
# binary). tandem_layers() lists them from the lowest layer to the highest; one argument is
# one layer, and the modules of one layer (e.g. "backend/cpu backend/cuda") are peers.
#
# The rule: a module includes its own headers and those of the modules it declares in DEPS,
# and every module in DEPS is in a lower layer. Three things hold it:
#   - configure: a DEPS entry that is a module of the same or a higher layer is an error;
#   - build: before a module compiles, cmake/check_includes.cmake reads its files and
#     fails on an include of a module it does not declare (or one above it), or on a
#     relative include that leaves its folder ("../");
#   - build: each module's include path holds only itself and the modules below it that it
#     reaches through DEPS (build/include/<target>/<module> is a link to src/<module>), so
#     an include of a higher module that slips past the check cannot compile either.
#
# tandem_module(<target> [DIR <dir>] [EXECUTABLE] [DEPS <targets>...])
#   DIR defaults to the calling CMakeLists.txt's folder; sources (*.cpp, and *.cu when CUDA
#   is on) are globbed, so adding a file needs no CMake edit. EXECUTABLE builds a program
#   instead of a library. DEPS: modules (by target) and third-party targets the module uses.

set(TANDEM_CHECK_INCLUDES ${CMAKE_CURRENT_LIST_DIR}/check_includes.cmake)

# tandem_layers(<layer>...): records each module's layer, then adds each module folder of
# src/ in that order. A module is skipped when TANDEM_MODULE_ENABLED_<module> is defined
# and false (for instance backend/cuda without nvcc).
function(tandem_layers)
  set(_rank 0)
  set(_all "")
  set(_disabled "")
  foreach(_layer IN LISTS ARGN)
    string(REPLACE " " ";" _mods "${_layer}")
    foreach(_m IN LISTS _mods)
      if(_m STREQUAL "")
        continue()
      endif()
      set_property(GLOBAL PROPERTY TANDEM_LAYER_${_m} ${_rank})
      list(APPEND _all ${_m})
    endforeach()
    math(EXPR _rank "${_rank} + 1")
  endforeach()
  foreach(_m IN LISTS _all)
    if(DEFINED TANDEM_MODULE_ENABLED_${_m} AND NOT TANDEM_MODULE_ENABLED_${_m})
      list(APPEND _disabled ${_m})
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY TANDEM_MODULES ${_all})
  set_property(GLOBAL PROPERTY TANDEM_DISABLED_MODULES ${_disabled})
  foreach(_m IN LISTS _all)
    if(_m IN_LIST _disabled)
      continue()
    endif()
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/src/${_m}/CMakeLists.txt)
      message(FATAL_ERROR "tandem_layers: src/${_m}/CMakeLists.txt does not exist")
    endif()
    add_subdirectory(${PROJECT_SOURCE_DIR}/src/${_m} ${CMAKE_BINARY_DIR}/src/${_m})
  endforeach()
endfunction()

function(tandem_module name)
  cmake_parse_arguments(M "EXECUTABLE" "DIR" "DEPS" ${ARGN})
  if(NOT M_DIR)
    set(M_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  endif()
  file(RELATIVE_PATH _mod ${PROJECT_SOURCE_DIR}/src ${M_DIR})
  get_property(_rank GLOBAL PROPERTY TANDEM_LAYER_${_mod})
  if("${_rank}" STREQUAL "")
    message(FATAL_ERROR "${name}: src/${_mod} is not in tandem_layers() (top-level CMakeLists.txt)")
  endif()

  # The declared modules: each must be a module already defined in a lower layer.
  set(_allowed ${_mod})
  foreach(_d IN LISTS M_DEPS)
    if(TARGET ${_d})
      get_property(_dmod TARGET ${_d} PROPERTY TANDEM_MODULE)
    else()
      set(_dmod "")
    endif()
    if("${_dmod}" STREQUAL "")
      if(_d MATCHES "^tandem")
        message(FATAL_ERROR "${name} (src/${_mod}): DEPS names ${_d}, which is not a module of a "
                            "lower layer (modules are defined lowest layer first)")
      endif()
      continue()  # a third-party target
    endif()
    get_property(_drank GLOBAL PROPERTY TANDEM_LAYER_${_dmod})
    if(NOT _drank LESS _rank)
      message(FATAL_ERROR "${name} (src/${_mod}): DEPS names ${_d} (src/${_dmod}), which is not in "
                          "a lower layer: dependencies point down (docs/DESIGN.md, Layers)")
    endif()
    list(APPEND _allowed ${_dmod})
  endforeach()

  file(GLOB _srcs CONFIGURE_DEPENDS ${M_DIR}/*.cpp)
  file(GLOB _hdrs CONFIGURE_DEPENDS ${M_DIR}/*.h ${M_DIR}/*.cuh)
  if(TANDEM_HAVE_CUDA)
    file(GLOB _cu CONFIGURE_DEPENDS ${M_DIR}/*.cu)
    list(APPEND _srcs ${_cu})
  endif()

  # The module's include root: build/include/<target>/<module> -> src/<module>.
  set(_inc ${CMAKE_BINARY_DIR}/include/${name})
  get_filename_component(_parent ${_inc}/${_mod} DIRECTORY)
  file(MAKE_DIRECTORY ${_parent})
  if(IS_SYMLINK ${_inc}/${_mod})
    file(READ_SYMLINK ${_inc}/${_mod} _target)
  else()
    set(_target "")
  endif()
  if(NOT _target STREQUAL M_DIR)
    file(REMOVE ${_inc}/${_mod})
    file(CREATE_LINK ${M_DIR} ${_inc}/${_mod} SYMBOLIC)
  endif()

  if(M_EXECUTABLE)
    add_executable(${name} ${_srcs})
    set(_scope PRIVATE)
  elseif(_srcs MATCHES "\\.(cpp|cu)")
    add_library(${name} STATIC ${_srcs})
    set(_scope PUBLIC)
  else()
    add_library(${name} INTERFACE)
    set(_scope INTERFACE)
  endif()
  target_include_directories(${name} ${_scope} ${_inc})
  target_link_libraries(${name} ${_scope} ${M_DEPS})
  set_property(TARGET ${name} PROPERTY TANDEM_MODULE ${_mod})

  # The include check, run whenever one of the module's files changes.
  get_property(_modules GLOBAL PROPERTY TANDEM_MODULES)
  set(_lower "")
  foreach(_m IN LISTS _modules)
    get_property(_mrank GLOBAL PROPERTY TANDEM_LAYER_${_m})
    if(_mrank LESS _rank)
      list(APPEND _lower ${_m})
    endif()
  endforeach()
  set(_files ${_srcs} ${_hdrs})
  set(_stamp ${CMAKE_BINARY_DIR}/include/${name}.checked)
  string(REPLACE ";" "," _allowed_arg "${_allowed}")
  string(REPLACE ";" "," _modules_arg "${_modules}")
  string(REPLACE ";" "," _lower_arg "${_lower}")
  get_property(_disabled GLOBAL PROPERTY TANDEM_DISABLED_MODULES)
  string(REPLACE ";" "," _disabled_arg "${_disabled}")
  add_custom_command(
    OUTPUT ${_stamp}
    COMMAND ${CMAKE_COMMAND} -DMODULE=${_mod} -DTARGET=${name} "-DALLOWED=${_allowed_arg}"
            "-DMODULES=${_modules_arg}" "-DLOWER=${_lower_arg}"
            "-DDISABLED=${_disabled_arg}" -DDIR=${M_DIR}
            -DROOT=${PROJECT_SOURCE_DIR} -DSTAMP=${_stamp}
            -P ${TANDEM_CHECK_INCLUDES}
    DEPENDS ${_files} ${TANDEM_CHECK_INCLUDES}
    COMMENT "Checking the includes of src/${_mod}"
    VERBATIM)
  add_custom_target(${name}_includes DEPENDS ${_stamp})
  add_dependencies(${name} ${name}_includes)
endfunction()
