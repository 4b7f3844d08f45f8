# Installation of the CMake package, the pkg-config file, the licence and the docs, and CPack's Debian package.
# Included by the top-level CMakeLists.txt when SUPERPOINT_RT_INSTALL is ON (the library, headers and executable have
# their install rules beside their targets). docs/INSTALL.md describes the result.
include(CMakePackageConfigHelpers)

set(SPRT_SUMMARY "SuperPoint keypoints and descriptors (Hugging Face request path) in C++ on oneDNN")
set(_cmakedir "${CMAKE_INSTALL_LIBDIR}/cmake/superpoint_rt")

# CMake package: superpoint_rt::superpoint_rt.
install(EXPORT superpoint_rtTargets NAMESPACE superpoint_rt:: DESTINATION ${_cmakedir} COMPONENT dev)
configure_package_config_file(cmake/superpoint_rtConfig.cmake.in
                              "${PROJECT_BINARY_DIR}/generated/superpoint_rtConfig.cmake"
                              INSTALL_DESTINATION ${_cmakedir})
# 0.x: only the same minor version is compatible (see the SONAME in src/CMakeLists.txt); from 1.0 the same major.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_compat SameMinorVersion)
else()
  set(_compat SameMajorVersion)
endif()
write_basic_package_version_file("${PROJECT_BINARY_DIR}/generated/superpoint_rtConfigVersion.cmake"
                                 COMPATIBILITY ${_compat})
install(FILES "${PROJECT_BINARY_DIR}/generated/superpoint_rtConfig.cmake"
              "${PROJECT_BINARY_DIR}/generated/superpoint_rtConfigVersion.cmake"
        DESTINATION ${_cmakedir} COMPONENT dev)

# pkg-config: relocatable (prefix from ${pcfiledir}), so `cmake --install --prefix P` into any P works.
set(_pcdir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
file(RELATIVE_PATH SPRT_PC_TO_PREFIX "/prefix/${_pcdir}" "/prefix")
string(REGEX REPLACE "/$" "" SPRT_PC_TO_PREFIX "${SPRT_PC_TO_PREFIX}")
if(SUPERPOINT_RT_SHARED)
  set(SPRT_PC_LIBS_PRIVATE "-pthread")
else()
  # pkg-config --static --libs: what libsuperpoint_rt.a links (src/CMakeLists.txt, _private_deps), as files.
  set(SPRT_PC_LIBS_PRIVATE "$<TARGET_LINKER_FILE:DNNL::dnnl>")
  foreach(l ${OpenMP_CXX_FLAGS} ${JPEG_LIBRARIES} ${PNG_LIBRARIES} ${GIF_LIBRARIES} ${TIFF_LIBRARIES}
            ${WEBP_LINK_LIBRARIES} ${DEFLATE_LINK_LIBRARIES} ${CURL_LIBRARIES} ${HDF5_C_LIBRARIES} ${SQLite3_LIBRARIES}
            ${ZLIB_LIBRARIES} -pthread)
    string(APPEND SPRT_PC_LIBS_PRIVATE " ${l}")
  endforeach()
endif()
configure_file(cmake/superpoint_rt.pc.in "${PROJECT_BINARY_DIR}/generated/superpoint_rt.pc.in" @ONLY)
file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/generated/superpoint_rt.pc"
     INPUT "${PROJECT_BINARY_DIR}/generated/superpoint_rt.pc.in")
install(FILES "${PROJECT_BINARY_DIR}/generated/superpoint_rt.pc" DESTINATION ${_pcdir} COMPONENT dev)

# Licence and docs. The SuperPoint weights are Magic Leap's and are never installed (README, "Weights").
install(FILES LICENSE README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT runtime FILES_MATCHING PATTERN "*.md")
install(DIRECTORY examples/cpp/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/cpp COMPONENT dev)

# CPack: one Debian package, superpoint-rt_<version>_<arch>.deb, with the executable, the library and what building
# against it needs (headers, CMake and pkg-config files): they are small and need no other -dev package, because the
# shared library keeps its dependencies private. Depends comes from dpkg-shlibdeps.
set(CPACK_PACKAGE_NAME "superpoint-rt")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "superpoint-rt authors")
set(CPACK_PACKAGE_CONTACT "superpoint-rt authors <superpoint-rt@invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${SPRT_SUMMARY}")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_GENERATOR "DEB")
set(CPACK_DEBIAN_FILE_NAME "DEB-DEFAULT")
set(CPACK_DEBIAN_PACKAGE_SECTION "science")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "${SPRT_SUMMARY}\n The superpoint-rt command (extract, serve, info, ...), the shared library libsuperpoint_rt,\n its C++ headers, CMake package and pkg-config file. The SuperPoint weights are not included.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The package's own library is found in the staging tree, not on this machine.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${CMAKE_INSTALL_LIBDIR}")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # shlibs file + the ldconfig trigger
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "g++ (>= 4:12), cmake, pkg-config")
set(CPACK_SOURCE_GENERATOR "")
include(CPack)
