# Fails when a module's files include a module they may not (the rule: cmake/Module.cmake).
# The build runs it before the module compiles, with
#   MODULE   the module (engine), TARGET its target (tandem_engine), DIR its folder,
#   ALLOWED  the module and the modules it declares in DEPS,
#   LOWER    every module of a lower layer, MODULES every module of tandem_layers(),
#   DISABLED the modules this build leaves out,
#   ROOT     the project folder (for messages), STAMP the file written when all is well;
# lists separated by commas.
cmake_minimum_required(VERSION 3.25)

# The line number of `text` in `file` (only called on the lines reported). Semicolons and
# brackets would split or join CMake list items, so they are masked first.
function(line_of file text out)
  file(READ ${file} _c)
  string(REPLACE ";" "<s>" _c "${_c}")
  string(REPLACE "[" "<o>" _c "${_c}")
  string(REPLACE "]" "<c>" _c "${_c}")
  string(REPLACE "\n" ";" _c "${_c}")
  set(_i 0)
  foreach(_l IN LISTS _c)
    math(EXPR _i "${_i} + 1")
    if(_l STREQUAL text)
      set(${out} ${_i} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "?" PARENT_SCOPE)
endfunction()

foreach(_v ALLOWED LOWER MODULES DISABLED)
  string(REPLACE "," ";" _${_v} "${${_v}}")
endforeach()
file(GLOB _files ${DIR}/*.cpp ${DIR}/*.h ${DIR}/*.cu ${DIR}/*.cuh)
list(SORT _files)
set(_errors "")
foreach(_f IN LISTS _files)
  file(RELATIVE_PATH _rel ${ROOT} ${_f})
  file(STRINGS ${_f} _lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(_line IN LISTS _lines)
    string(REGEX MATCH "\"([^\"]+)\"" _m "${_line}")
    set(_inc ${CMAKE_MATCH_1})
    if(_inc MATCHES "(^|/)\\.\\./")
      line_of(${_f} "${_line}" _n)
      string(APPEND _errors "${_rel}:${_n}: #include \"${_inc}\" leaves src/${MODULE}: include "
                            "another module by its path (\"model/runner.h\")\n")
      continue()
    endif()
    # The module it names: the longest module path that prefixes it (backend/cpu, not backend).
    set(_owner "")
    foreach(_m IN LISTS _MODULES)
      string(LENGTH "${_m}/" _len)
      string(SUBSTRING "${_inc}" 0 ${_len} _head)
      string(LENGTH "${_owner}" _olen)
      if(_head STREQUAL "${_m}/" AND _len GREATER _olen)
        set(_owner ${_m})
      endif()
    endforeach()
    if("${_owner}" STREQUAL "" OR _owner IN_LIST _ALLOWED)
      continue()
    endif()
    # A module this build leaves out (backend/cuda without nvcc) is declared only when it is
    # built; its includes sit behind the module's own #if, and no include path holds it.
    if(_owner IN_LIST _DISABLED AND _owner IN_LIST _LOWER)
      continue()
    endif()
    line_of(${_f} "${_line}" _n)
    if(_owner IN_LIST _LOWER)
      string(APPEND _errors "${_rel}:${_n}: #include \"${_inc}\": src/${_owner} is not declared: "
                            "add its target to DEPS of ${TARGET} (src/${MODULE}/CMakeLists.txt)\n")
    else()
      string(APPEND _errors "${_rel}:${_n}: #include \"${_inc}\": src/${MODULE} may not include "
                            "src/${_owner}, which is not in a lower layer (dependencies point "
                            "down: docs/DESIGN.md, Layers)\n")
    endif()
  endforeach()
endforeach()
if(NOT _errors STREQUAL "")
  file(REMOVE ${STAMP})
  message(FATAL_ERROR "layering check failed:\n${_errors}")
endif()
file(TOUCH ${STAMP})
