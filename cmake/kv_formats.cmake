# decodebench_export_kv_formats(): the KV formats' table (kernels/kv_formats.h, their one list)
# for CMake and the scripts. Compiles and runs kernels/kv_formats_export.cpp with the configured
# C++ compiler, writes its JSON to ${PROJECT_BINARY_DIR}/kv_formats.json (what scripts/*.py and
# scripts/*.sh read: scripts/kv_formats.py), and sets in the caller's scope:
#   DECODEBENCH_KV_FORMATS         every format's name, in enum order
#   DECODEBENCH_KV_FORMATS_LADDER  the formats every rung of the ladder is instantiated for
#                                  ("ladder": "all"; the default of DECODEBENCH_KV_DTYPES)
#   DECODEBENCH_KV_FORMATS_INT_KV  the formats of the "int_kv" rungs only ("ladder": "int_kv";
#                                  the default of DECODEBENCH_INT_KV_DTYPES)
# and re-runs the configure step when the table or the exporter changes.
function(decodebench_export_kv_formats)
  set(header ${PROJECT_SOURCE_DIR}/kernels/kv_formats.h)
  set(exporter ${PROJECT_SOURCE_DIR}/kernels/kv_formats_export.cpp)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${header} ${exporter})
  try_run(run_result compile_result ${PROJECT_BINARY_DIR}/kv_formats_export ${exporter}
    CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${PROJECT_SOURCE_DIR}/kernels"
    CXX_STANDARD 17
    CXX_STANDARD_REQUIRED ON
    COMPILE_OUTPUT_VARIABLE compile_output
    RUN_OUTPUT_VARIABLE json)
  if(NOT compile_result)
    message(FATAL_ERROR "kernels/kv_formats_export.cpp does not compile:\n${compile_output}")
  endif()
  if(NOT run_result EQUAL 0)
    message(FATAL_ERROR "kernels/kv_formats_export.cpp exited ${run_result}:\n${json}")
  endif()
  file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/kv_formats.json CONTENT "${json}" @ONLY)
  string(JSON count ERROR_VARIABLE err LENGTH "${json}" formats)
  if(err OR count EQUAL 0)
    message(FATAL_ERROR "kv_formats.json: no 'formats' array: ${err}")
  endif()
  set(all "")
  set(ladder "")
  set(int_kv "")
  math(EXPR last "${count} - 1")
  foreach(i RANGE ${last})
    string(JSON name GET "${json}" formats ${i} name)
    string(JSON use GET "${json}" formats ${i} ladder)
    list(APPEND all ${name})
    if(use STREQUAL "all")
      list(APPEND ladder ${name})
    elseif(use STREQUAL "int_kv")
      list(APPEND int_kv ${name})
    endif()
  endforeach()
  set(DECODEBENCH_KV_FORMATS ${all} PARENT_SCOPE)
  set(DECODEBENCH_KV_FORMATS_LADDER ${ladder} PARENT_SCOPE)
  set(DECODEBENCH_KV_FORMATS_INT_KV ${int_kv} PARENT_SCOPE)
endfunction()
