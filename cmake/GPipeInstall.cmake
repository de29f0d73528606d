# What `cmake --install build --prefix P` puts under P:
#   lib/libgpipe_runtime.so.<api> (and .so), lib/libgpipe_runtime.a
#   include/gpipe/runtime/...            the runtime's headers
#   bin/gpipe-*                          the tools
#   lib/cmake/gpipe/gpipeConfig.cmake    find_package(gpipe): gpipe::runtime,
#                                        gpipe::runtime_static
#   lib/pkgconfig/gpipe-runtime.pc       pkg-config --cflags --libs gpipe-runtime
# test/Install/app is an application built against such a prefix
# (scripts/test-install.sh, the ctest `install-out-of-tree`).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The shared runtime is the static library's objects (position independent,
# compiled with hidden visibility): it exports the C API only, the functions
# gpipe_runtime.h marks GPIPE_API. Runtime.hpp, the documented C++ layer, is
# header-only over it.
set_target_properties(GPipeRuntime PROPERTIES
  OUTPUT_NAME gpipe_runtime
  EXPORT_NAME runtime_static
  CXX_VISIBILITY_PRESET hidden
  VISIBILITY_INLINES_HIDDEN ON)
file(STRINGS ${PROJECT_SOURCE_DIR}/runtime/include/gpipe/runtime/gpipe_runtime.h
  GPIPE_API_VERSION_LINE REGEX "^#define GPIPE_RUNTIME_API_VERSION [0-9]+")
string(REGEX MATCH "[0-9]+$" GPIPE_RUNTIME_API_VERSION "${GPIPE_API_VERSION_LINE}")
add_library(GPipeRuntimeShared SHARED $<TARGET_OBJECTS:GPipeRuntime>)
target_include_directories(GPipeRuntimeShared PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(GPipeRuntimeShared
  PRIVATE ${OPENBLAS_LIBRARY} ZLIB::ZLIB Threads::Threads)
set_target_properties(GPipeRuntimeShared PROPERTIES
  OUTPUT_NAME gpipe_runtime
  EXPORT_NAME runtime
  VERSION ${PROJECT_VERSION}
  SOVERSION ${GPIPE_RUNTIME_API_VERSION}
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/gpipe_runtime.map)
# No unresolved symbol may wait for the application; only gpipe_* leaves.
target_link_options(GPipeRuntimeShared PRIVATE -Wl,--no-undefined
  -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/gpipe_runtime.map)

install(TARGETS GPipeRuntime GPipeRuntimeShared EXPORT gpipeRuntimeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/gpipe/runtime
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpipe)
install(EXPORT gpipeRuntimeTargets NAMESPACE gpipe::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpipe)

# The tools.
set(GPIPE_INSTALLED_TOOLS gpipe-train-bundle)
if(GPIPE_BUILD_COMPILER)
  list(APPEND GPIPE_INSTALLED_TOOLS gpipe-opt gpipe-translate gpipe-run
       gpipe-bench gpipe-capacity gpipe-tune gpipe-onnx-conformance)
endif()
install(TARGETS ${GPIPE_INSTALLED_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(GPIPE_MLIR_DIR "${MLIR_DIR}")
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gpipeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/gpipeConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpipe)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/gpipeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/gpipeConfig.cmake
  ${PROJECT_BINARY_DIR}/gpipeConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpipe)

# pkg-config: the shared library; `--static` adds what the archive needs.
# The prefix is found from the .pc file's place, so --prefix may change.
set(GPIPE_PC_PREFIX "\${pcfiledir}")
string(REPLACE "/" ";" GPIPE_PC_LEVELS "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
foreach(level IN LISTS GPIPE_PC_LEVELS)
  string(APPEND GPIPE_PC_PREFIX "/..")
endforeach()
get_filename_component(GPIPE_OPENBLAS_DIR ${OPENBLAS_LIBRARY} DIRECTORY)
set(GPIPE_RUNTIME_PRIVATE_LIBS "-L${GPIPE_OPENBLAS_DIR} -lopenblas -lz -lpthread -lstdc++ -lm")
configure_file(${PROJECT_SOURCE_DIR}/cmake/gpipe-runtime.pc.in
  ${PROJECT_BINARY_DIR}/gpipe-runtime.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/gpipe-runtime.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# An application outside the tree, built against this build installed.
if(GPIPE_BUILD_COMPILER)
  add_test(NAME install-out-of-tree
    COMMAND ${PROJECT_SOURCE_DIR}/scripts/test-install.sh ${PROJECT_BINARY_DIR}
            ${PROJECT_BINARY_DIR}/install-test)
  set_tests_properties(install-out-of-tree PROPERTIES LABELS install TIMEOUT 600)
endif()
