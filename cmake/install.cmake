# Install rules and packages (docs/guide.md#build-and-install): the three tools, the runtime library with its
# headers, the plugin EP, a CMake package (ctxkit::runtime, ctxkit::ctxgen, ctxkit_compile()) and a pkg-config file.
include(CMakePackageConfigHelpers)

# The runtime library and every static library it needs, in link order (a library before those it uses); the
# pkg-config file lists them in this order. install(EXPORT) fails the configure step if one is missing.
set(CTXKIT_RUNTIME_LIBRARIES
  ctxkit_runtime ctxkit_onnx_io ctxkit_runtime_core ctxkit_epcontext ctxkit_format ctxkit_program ctxkit_kernels
  ctxkit_cpu ctxkit_ops ctxkit_ir ctxkit_support)
foreach(lib ${CTXKIT_RUNTIME_LIBRARIES})
  string(REGEX REPLACE "^ctxkit_" "" export_name ${lib})
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${export_name})
  string(REGEX REPLACE "^ctxkit_" "" folder ${lib})
  if(folder MATCHES "^runtime")
    set(folder runtime)
  endif()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/lib/${folder}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ctxkit/${folder}
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def"
          PATTERN "proto_convert.h" EXCLUDE)  # onnx_io's protobuf side stays private: no consumer needs onnx headers
endforeach()
# The version header is generated from project(VERSION) into the build tree.
install(FILES ${PROJECT_BINARY_DIR}/lib/epcontext/include/epcontext/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ctxkit/epcontext)

# Names a consumer sees, also inside this build (ctxkit as a subproject uses the same names).
add_library(ctxkit::runtime ALIAS ctxkit_runtime)
add_executable(ctxkit::ctxgen ALIAS ctxgen)
foreach(tool ctxgen ctxinspect ctxrun)
  set_target_properties(${tool} PROPERTIES EXPORT_NAME ${tool})
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/ctxkitCompile.cmake)

install(TARGETS ${CTXKIT_RUNTIME_LIBRARIES} ctxgen ctxinspect ctxrun
  EXPORT ctxkitTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The plugin EP is loaded by ONNX Runtime at run time (RegisterExecutionProviderLibrary), not linked: no target.
if(TARGET ctxkit_ep)
  install(TARGETS ctxkit_ep LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()

# Man pages made by help2man from each tool's --help and --version, so they say what the tools say.
find_program(CTXKIT_HELP2MAN help2man)
if(CTXKIT_HELP2MAN)
  set(man_pages)
  set(ctxgen_name "compile ONNX models to EPContext models and a context binary")
  set(ctxinspect_name "list EPContext nodes and deployment files, verify ctxkit context binaries")
  set(ctxrun_name "run a _ctx.onnx model (or a plain .onnx) with ctxkit's runtime")
  foreach(tool ctxgen ctxinspect ctxrun)
    set(page ${PROJECT_BINARY_DIR}/man/${tool}.1)
    add_custom_command(OUTPUT ${page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
      COMMAND ${CTXKIT_HELP2MAN} --no-info --section=1 --source=ctxkit "--name=${${tool}_name}" --output=${page} $<TARGET_FILE:${tool}>
      DEPENDS ${tool}
      COMMENT "Writing the man page ${tool}.1"
      VERBATIM)
    list(APPEND man_pages ${page})
  endforeach()
  add_custom_target(man_pages ALL DEPENDS ${man_pages})
  install(FILES ${man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "ctxkit: man pages skipped: help2man not found (Debian package help2man)")
endif()
# Bash completion: one script for the three tools, under each name so that bash-completion finds it on demand.
foreach(tool ctxgen ctxinspect ctxrun)
  install(FILES ${PROJECT_SOURCE_DIR}/share/bash-completion/ctxkit.bash
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME ${tool})
endforeach()

set(CTXKIT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ctxkit)
install(EXPORT ctxkitTargets NAMESPACE ctxkit:: DESTINATION ${CTXKIT_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ctxkitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/ctxkitConfig.cmake INSTALL_DESTINATION ${CTXKIT_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
# 0.x releases promise nothing across minor versions, so a request for 0.1 accepts 0.1.z only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/ctxkitConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/ctxkitConfig.cmake ${PROJECT_BINARY_DIR}/cmake/ctxkitConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/ctxkitCompile.cmake
        DESTINATION ${CTXKIT_CMAKE_DIR})

# pkg-config: static libraries only, so their dependencies are in Libs/Requires, not the .private fields.
# The prefix is found from the file's own place (${pcfiledir}), so the package can be installed with --prefix anywhere.
file(RELATIVE_PATH CTXKIT_PC_PREFIX "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" CTXKIT_PC_PREFIX "${CTXKIT_PC_PREFIX}")
set(CTXKIT_PC_LIBS "")
foreach(lib ${CTXKIT_RUNTIME_LIBRARIES})
  string(APPEND CTXKIT_PC_LIBS " -l${lib}")
endforeach()
configure_file(${CMAKE_CURRENT_LIST_DIR}/ctxkit.pc.in ${PROJECT_BINARY_DIR}/cmake/ctxkit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cmake/ctxkit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
