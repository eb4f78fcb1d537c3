# cmake --install build --prefix P: the daemons and the CLI in P/bin, the Python package in
# P/python (PYTHONPATH=P/python), and the C++ SDK: headers in P/include, static libraries in
# P/lib, and a CMake package, so that out-of-tree code does
#   find_package(SkyrlRuntime REQUIRED)
#   target_link_libraries(my_host PRIVATE skyrl::actor)   # SKYRL_REGISTER_ACTOR classes
#   target_link_libraries(my_driver PRIVATE skyrl::client)
# (examples/cpp_actor is such a project, built against an install by tests/sdk).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_skyrl_sdk_libs common rpc protos actor client archive)
foreach(lib ${_skyrl_sdk_libs})
  target_include_directories(skyrl_${lib} PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_target_properties(skyrl_${lib} PROPERTIES EXPORT_NAME ${lib})
  list(APPEND _skyrl_sdk_targets skyrl_${lib})
endforeach()
install(TARGETS ${_skyrl_sdk_targets} EXPORT SkyrlRuntimeTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/runtime
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${CMAKE_BINARY_DIR}/gen/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT SkyrlRuntimeTargets NAMESPACE skyrl:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/SkyrlRuntime)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SkyrlRuntimeConfig.cmake.in
  ${CMAKE_BINARY_DIR}/SkyrlRuntimeConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/SkyrlRuntime)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/SkyrlRuntimeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/SkyrlRuntimeConfig.cmake ${CMAKE_BINARY_DIR}/SkyrlRuntimeConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/SkyrlRuntime)

install(TARGETS skyrl-head skyrl-worker skyrl skyrl-actor-host RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(SKYRL_HAVE_PYTHON)
  install(DIRECTORY ${CMAKE_BINARY_DIR}/python/skyrl_runtime DESTINATION python
          PATTERN "__pycache__" EXCLUDE)
  install(PROGRAMS ${CMAKE_BINARY_DIR}/bin/skyrl-actor-host-python DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
