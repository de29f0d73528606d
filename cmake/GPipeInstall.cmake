# What `cmake --install build --prefix P` puts under P:
#   lib/libgpipe_runtime.so.<api> (and .so), lib/libgpipe_runtime.a,
#   lib/libgpipe_runtime_core.a          the core alone (runtime/src)
#   include/gpipe/runtime/...            the runtime's headers
#   bin/gpipe-*                          the tools
#   lib/cmake/gpipe/gpipeConfig.cmake    find_package(gpipe): gpipe::runtime,
#                                        gpipe::runtime_static,
#                                        gpipe::runtime_core
#   lib/pkgconfig/gpipe-runtime.pc       pkg-config --cflags --libs gpipe-runtime
# test/Install/app is an application built against such a prefix
# (scripts/test-install.sh, the ctest `install-out-of-tree`).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The shared runtime is the static library's objects, those of every layer
# (position independent, compiled with hidden visibility: runtime/src): it
# exports the C API only, the functions gpipe_runtime.h and its parts
# (gpipe/runtime/capi/*.h, which it includes) mark GPIPE_API.
# Runtime.hpp, the documented C++ layer, is header-only over it.
set_target_properties(GPipeRuntime PROPERTIES
  OUTPUT_NAME gpipe_runtime
  EXPORT_NAME runtime_static)
file(GLOB GPIPE_C_API_PARTS CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/runtime/include/gpipe/runtime/capi/*.h)
set(GPIPE_C_API_HEADERS
  ${PROJECT_SOURCE_DIR}/runtime/include/gpipe/runtime/gpipe_runtime.h
  ${GPIPE_C_API_PARTS})
# GPIPE_RUNTIME_API_VERSION, from whichever part defines it (exactly one).
set(GPIPE_API_VERSION_LINE)
foreach(header IN LISTS GPIPE_C_API_HEADERS)
  file(STRINGS ${header} line
    REGEX "^#define GPIPE_RUNTIME_API_VERSION [0-9]+")
  list(APPEND GPIPE_API_VERSION_LINE ${line})
endforeach()
list(LENGTH GPIPE_API_VERSION_LINE GPIPE_API_VERSION_COUNT)
if(NOT GPIPE_API_VERSION_COUNT EQUAL 1)
  message(FATAL_ERROR "the C API headers (${GPIPE_C_API_HEADERS}) define "
    "GPIPE_RUNTIME_API_VERSION ${GPIPE_API_VERSION_COUNT} times, expected once")
endif()
string(REGEX MATCH "[0-9]+$" GPIPE_RUNTIME_API_VERSION "${GPIPE_API_VERSION_LINE}")
# A new API version in the headers configures again (the SOVERSION follows).
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${GPIPE_C_API_HEADERS})
# The runtime's dependencies, found here too: imported targets are visible
# only in the directory that found them (runtime/).
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)
set(GPIPE_RUNTIME_OBJECTS)
foreach(layer IN LISTS GPIPE_RUNTIME_LAYERS)
  list(APPEND GPIPE_RUNTIME_OBJECTS $<TARGET_OBJECTS:GPipeRuntime${layer}>)
endforeach()
add_library(GPipeRuntimeShared SHARED ${GPIPE_RUNTIME_OBJECTS})
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
# Only gpipe_* leaves the library. (No --no-undefined: a sanitizer build's
# objects leave the sanitizer runtime to the executable.)
target_link_options(GPipeRuntimeShared PRIVATE
  -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/gpipe_runtime.map)

install(TARGETS GPipeRuntime GPipeRuntimeCore GPipeRuntimeShared
  EXPORT gpipeRuntimeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The runtime's headers, the C API's parts (capi/) among them.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/gpipe/runtime
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/gpipe)
install(EXPORT gpipeRuntimeTargets NAMESPACE gpipe::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpipe)

# The tools.
set(GPIPE_INSTALLED_TOOLS gpipe-train-bundle)
if(GPIPE_BUILD_COMPILER)
  list(APPEND GPIPE_INSTALLED_TOOLS gpipe-opt gpipe-translate gpipe-run gpipe-report
       gpipe-bench gpipe-capacity gpipe-tune gpipe-onnx-conformance)
endif()
install(TARGETS ${GPIPE_INSTALLED_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The compiler's libraries (gpipe::compiler): gpipe::GPipeTarget (the whole
# compiler as one call, gpipe/Target/CompileToBundle.h) and the gpipe
# libraries it needs, static, over MLIR 22's own CMake targets. LLVM's
# add_mlir_library installs these archives into MLIR's export set, which
# gpipe does not install; the imported targets are written here instead,
# from each library's link list.
if(GPIPE_BUILD_COMPILER)
  function(gpipe_compiler_closure target out)
    set(seen ${${out}})
    if(target IN_LIST seen)
      return()
    endif()
    list(APPEND seen ${target})
    get_target_property(deps ${target} LINK_LIBRARIES)
    foreach(dep IN LISTS deps)
      if(dep MATCHES "^GPipe" AND NOT dep STREQUAL "GPipeRuntime")
        gpipe_compiler_closure(${dep} seen)
      endif()
    endforeach()
    set(${out} ${seen} PARENT_SCOPE)
  endfunction()
  set(GPIPE_COMPILER_LIBRARIES)
  gpipe_compiler_closure(GPipeTarget GPIPE_COMPILER_LIBRARIES)
  set(targets_text "# gpipe's compiler libraries (generated by cmake/GPipeInstall.cmake).\n")
  set(up "")
  string(REPLACE "/" ";" levels "${CMAKE_INSTALL_LIBDIR}/cmake/gpipe")
  foreach(level IN LISTS levels)
    string(APPEND up "/..")
  endforeach()
  string(APPEND targets_text
    "get_filename_component(_gpipe_prefix \"\${CMAKE_CURRENT_LIST_DIR}${up}\" ABSOLUTE)\n")
  foreach(lib IN LISTS GPIPE_COMPILER_LIBRARIES)
    get_target_property(deps ${lib} LINK_LIBRARIES)
    set(interface)
    foreach(dep IN LISTS deps)
      if(dep MATCHES "^GPipe")
        list(APPEND interface "gpipe::${dep}")
      elseif(dep)
        list(APPEND interface "${dep}")
      endif()
    endforeach()
    string(APPEND targets_text
      "if(NOT TARGET gpipe::${lib})\n"
      "  add_library(gpipe::${lib} STATIC IMPORTED)\n"
      "  set_target_properties(gpipe::${lib} PROPERTIES\n"
      "    IMPORTED_LOCATION \"\${_gpipe_prefix}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:${lib}>\"\n"
      "    INTERFACE_INCLUDE_DIRECTORIES \"\${_gpipe_prefix}/${CMAKE_INSTALL_INCLUDEDIR}\"\n"
      "    INTERFACE_LINK_LIBRARIES \"${interface}\")\n"
      "endif()\n")
    install(TARGETS ${lib} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endforeach()
  string(APPEND targets_text
    "if(NOT TARGET gpipe::compiler)\n"
    "  add_library(gpipe::compiler INTERFACE IMPORTED)\n"
    "  set_target_properties(gpipe::compiler PROPERTIES\n"
    "    INTERFACE_LINK_LIBRARIES gpipe::GPipeTarget)\n"
    "endif()\n")
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/gpipeCompilerTargets.cmake
    CONTENT "${targets_text}")
  install(FILES ${PROJECT_BINARY_DIR}/gpipeCompilerTargets.cmake
    DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/gpipe)
  # The compiler's headers, with those TableGen generates.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/gpipe
    ${PROJECT_BINARY_DIR}/include/gpipe
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.inc" PATTERN "*.def")
endif()

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
