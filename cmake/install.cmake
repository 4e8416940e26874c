# Install and export rules shared by the library folders (top-level CMakeLists.txt includes this
# before adding them). The installed layout, under the prefix:
#   include/zeroshard/<folder>/<file>.h   public headers, the source tree's folders
#   lib/libzs_<layer>.a                   the static libraries
#   lib/cmake/zeroshard/                  zeroshardConfig.cmake, its version file, the targets
# Consumers write #include <zeroshard/runtime/engine.h>; both include/ and include/zeroshard/ are
# on the exported include path, because the headers include each other as "core/buffer.h".
include(GNUInstallDirs)

set(ZS_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/zeroshard)
set(ZS_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/zeroshard)

# zs_install_headers([EXCLUDE file...] | [FILES file...]): installs the public headers of the
# calling folder under include/zeroshard/<folder>/. Without FILES: every *.h of the folder except
# EXCLUDE (headers a folder adds later are installed without touching this). FILES: only those.
# Exclude what only the folder's .cc files include and what needs a dependency the package does
# not pass on to consumers.
function(zs_install_headers)
  cmake_parse_arguments(ARG "" "" "EXCLUDE;FILES" ${ARGN})
  if(ARG_FILES)
    set(headers ${ARG_FILES})
  else()
    file(GLOB headers CONFIGURE_DEPENDS RELATIVE ${CMAKE_CURRENT_SOURCE_DIR}
         ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
    if(ARG_EXCLUDE)
      list(REMOVE_ITEM headers ${ARG_EXCLUDE})
    endif()
  endif()
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  install(FILES ${headers} DESTINATION ${ZS_INSTALL_INCLUDEDIR}/${folder})
endfunction()
