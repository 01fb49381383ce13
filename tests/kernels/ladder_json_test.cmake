# cmake/ladder.cmake's checks of kernels/paged_decode/ladder.json, with planted faults: a rung
# without "compute" and one with an unknown unit must fail configuring with a message naming the
# rung and the valid units; a well-formed rung passes and reports its unit. The same for
# "prefix_aware" (required, boolean, needs "uses_workspace"), "int_kv" (optional, boolean) and
# "variants" (optional, an array of window, sinks, softcap, each once).
#   cmake -DLADDER_CMAKE=<cmake/ladder.cmake> -DWORK_DIR=<scratch dir> -P ladder_json_test.cmake
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
file(WRITE ${WORK_DIR}/r.cuh "")
file(WRITE ${WORK_DIR}/read.cmake "cmake_minimum_required(VERSION 3.20)
include(${LADDER_CMAKE})
decodebench_read_ladder(${WORK_DIR}/ladder.json)
message(STATUS \"compute=\${DECODEBENCH_RUNG_r_COMPUTE} int_kv=\${DECODEBENCH_RUNG_r_INT_KV} variants=[\${DECODEBENCH_RUNG_r_VARIANTS}]\")
")

# Configures `rung` (the JSON members after name and idea) and checks the outcome.
function(expect rung want_ok want_text)
  file(WRITE ${WORK_DIR}/ladder.json
       "{\"rungs\": [{\"name\": \"r\", \"idea\": \"one idea\", ${rung}}]}")
  execute_process(COMMAND ${CMAKE_COMMAND} -P ${WORK_DIR}/read.cmake
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REGEX REPLACE "[ \n]+" " " text "${out}${err}")  # CMake wraps its messages
  if(want_ok AND NOT rc EQUAL 0)
    message(FATAL_ERROR "rejected a good rung (${rung}): ${text}")
  endif()
  if(NOT want_ok AND rc EQUAL 0)
    message(FATAL_ERROR "accepted a bad rung (${rung}): ${text}")
  endif()
  string(FIND "${text}" "${want_text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "for (${rung}) the output lacks '${want_text}': ${text}")
  endif()
endfunction()

set(base "\"max_group\": 8, \"uses_workspace\": false, \"prefix_aware\": false")
expect("${base}, \"compute\": \"tensor_core\"" TRUE "compute=tensor_core")
expect("${base}, \"compute\": \"fma\"" TRUE "compute=fma")
expect("${base}" FALSE "rung 0 has no 'compute'")
expect("${base}, \"compute\": \"simd\"" FALSE "compute must be \"fma\" or \"tensor_core\", got 'simd'")
expect("${base}, \"compute\": 1" FALSE "compute must be")
# prefix_aware: required, boolean, and only with a workspace (the prefix partials merge there).
set(unaware "\"max_group\": 8, \"uses_workspace\": false, \"compute\": \"fma\"")
expect("${unaware}" FALSE "rung 0 has no 'prefix_aware'")
expect("${unaware}, \"prefix_aware\": 1" FALSE "prefix_aware must be true or false")
expect("\"max_group\": 8, \"uses_workspace\": false, \"prefix_aware\": true, \"compute\": \"tensor_core\""
       FALSE "prefix_aware needs uses_workspace")
expect("\"max_group\": 8, \"uses_workspace\": true, \"prefix_aware\": true, \"compute\": \"tensor_core\""
       TRUE "compute=tensor_core")
# int_kv: optional (false when absent), boolean.
expect("${base}, \"compute\": \"tensor_core\"" TRUE "int_kv=OFF")
expect("${base}, \"compute\": \"tensor_core\", \"int_kv\": true" TRUE "int_kv=ON")
expect("${base}, \"compute\": \"tensor_core\", \"int_kv\": \"yes\"" FALSE
       "int_kv must be true or false")
# variants: optional (none when absent), an array of known names, none twice.
expect("${base}, \"compute\": \"fma\"" TRUE "variants=[]")
expect("${base}, \"compute\": \"fma\", \"variants\": [\"window\", \"softcap\"]" TRUE
       "variants=[window;softcap]")
expect("${base}, \"compute\": \"fma\", \"variants\": \"window\"" FALSE
       "variants must be an array")
expect("${base}, \"compute\": \"fma\", \"variants\": [\"sliding\"]" FALSE
       "variant 'sliding' is unknown or listed twice (valid: window, sinks, softcap)")
expect("${base}, \"compute\": \"fma\", \"variants\": [\"sinks\", \"sinks\"]" FALSE
       "variant 'sinks' is unknown or listed twice")
file(REMOVE_RECURSE ${WORK_DIR})
