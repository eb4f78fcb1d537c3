# skyrl_cc_library(NAME name SRCS ... [HDRS ...] [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
#   Defines target skyrl_<name> with alias skyrl::<name>. Include paths are rooted at the
#   source tree, so headers are included as "runtime/store/store.h".
function(skyrl_cc_library)
  cmake_parse_arguments(L "" "NAME" "SRCS;HDRS;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(skyrl_${L_NAME} ${L_SRCS} ${L_HDRS})
  add_library(skyrl::${L_NAME} ALIAS skyrl_${L_NAME})
  target_include_directories(skyrl_${L_NAME} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_link_libraries(skyrl_${L_NAME} PUBLIC ${L_PUBLIC_DEPS} PRIVATE ${L_PRIVATE_DEPS})
  target_compile_options(skyrl_${L_NAME} PRIVATE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
endfunction()

# skyrl_cc_test(NAME name SRCS ... DEPS ... LABEL unit|integration|gpu)
#   One gtest binary; each test case is registered with ctest and labelled.
function(skyrl_cc_test)
  cmake_parse_arguments(T "" "NAME;LABEL;TIMEOUT" "SRCS;DEPS" ${ARGN})
  if(NOT T_LABEL)
    set(T_LABEL unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SRCS})
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/tests)
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_options(${T_NAME} PRIVATE -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers)
  gtest_discover_tests(${T_NAME}
    PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT}
               ENVIRONMENT "SKYRL_BIN_DIR=${CMAKE_BINARY_DIR}/bin"
    DISCOVERY_TIMEOUT 30)
endfunction()
