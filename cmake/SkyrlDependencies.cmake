# Finds every third-party dependency once, for the whole tree. Debian 12 packages only.
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)  # SHA-256 of working directories
find_package(absl CONFIG REQUIRED)
# Debian ships no protobuf-config.cmake: use CMake's FindProtobuf module.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_program(SKYRL_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
find_package(PkgConfig REQUIRED)
# hiredis's CMake config defines no target: go through pkg-config.
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
pkg_check_modules(LIBARCHIVE REQUIRED IMPORTED_TARGET libarchive)
pkg_check_modules(ZSTD REQUIRED IMPORTED_TARGET libzstd)  # weight sync deltas
find_package(spdlog CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)  # daemons' /metrics (Debian: prometheus-cpp-dev)
find_package(GTest CONFIG REQUIRED)

# CUDA runtime and NCCL are optional: a machine without the toolkit builds everything else.
set(SKYRL_HAVE_CUDA OFF)
set(SKYRL_HAVE_NCCL OFF)
if(NOT SKYRL_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(SKYRL_HAVE_CUDA ON)
    get_filename_component(_skyrl_cuda_root "${CUDAToolkit_LIBRARY_DIR}" DIRECTORY)
    find_path(SKYRL_NCCL_INCLUDE_DIR nccl.h
      HINTS ${CUDAToolkit_INCLUDE_DIRS} ${_skyrl_cuda_root}/include)
    find_library(SKYRL_NCCL_LIBRARY nccl
      HINTS ${CUDAToolkit_LIBRARY_DIR} ${_skyrl_cuda_root}/lib ${_skyrl_cuda_root}/lib64)
    if(SKYRL_NCCL_INCLUDE_DIR AND SKYRL_NCCL_LIBRARY)
      set(SKYRL_HAVE_NCCL ON)
      add_library(skyrl_nccl_imported UNKNOWN IMPORTED)
      set_target_properties(skyrl_nccl_imported PROPERTIES
        IMPORTED_LOCATION "${SKYRL_NCCL_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${SKYRL_NCCL_INCLUDE_DIR}")
      add_library(skyrl::nccl_imported ALIAS skyrl_nccl_imported)
    endif()
  endif()
  if(SKYRL_WITH_NCCL STREQUAL "ON" AND NOT SKYRL_HAVE_NCCL)
    message(FATAL_ERROR "SKYRL_WITH_NCCL=ON but the CUDA toolkit or NCCL was not found")
  endif()
endif()

# The Python package (python/): Debian's python3 (3.11, the one with python3-torch) and
# pybind11. Without them the rest builds and the package is skipped, saying so.
set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "the Python the skyrl_runtime package is built for")
find_package(Python3 COMPONENTS Interpreter Development.Module)
find_package(pybind11 CONFIG QUIET)
set(SKYRL_HAVE_PYTHON OFF)
if(Python3_FOUND AND pybind11_FOUND)
  set(SKYRL_HAVE_PYTHON ON)
endif()
