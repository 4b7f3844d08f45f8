# Every dependency is a Debian package (scripts/install-deps.sh installs them); nothing is vendored. Every
# find_package / pkg_check_modules of the project is here, so that one file lists what a build needs; the one
# exception is the Python extension's Python3 / pybind11 (python/CMakeLists.txt: a wheel build picks its pybind11
# from the build environment first).
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED)   # Debian's oneDNN uses the OpenMP runtime; we set its thread count per call
find_package(dnnl CONFIG REQUIRED)
find_package(ZLIB REQUIRED)
find_package(JPEG REQUIRED)
find_package(PNG REQUIRED)
find_package(GIF REQUIRED)
find_package(TIFF REQUIRED)
find_package(CURL REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C)  # batch/: hloc feature files (HDF5_C_LIBRARIES: the static .pc file)
find_package(SQLite3 REQUIRED)            # sfm/: COLMAP databases (SQLite::SQLite3; SQLite3_LIBRARIES for the .pc file)
find_package(PkgConfig REQUIRED)
pkg_check_modules(WEBP REQUIRED IMPORTED_TARGET libwebp)
# libdeflate: the PNG fast path inflates a whole IDAT stream in one call (src/image/png_fast.cpp).
pkg_check_modules(DEFLATE REQUIRED IMPORTED_TARGET libdeflate)
# Boost.Beast and Boost.Asio (libboost-dev, header-only), for `serve`'s HTTP transport (src/server/transport.cpp, the
# one translation unit that includes them) and the HTTP fuzz harness and its replay (fuzz/, built with the tests).
# Nothing to link at run time. Not needed by the library or the Python wheel.
if(SUPERPOINT_RT_CLI OR SUPERPOINT_RT_TESTS OR SUPERPOINT_RT_FUZZ)
  find_package(Boost 1.74 REQUIRED)
endif()
if(SUPERPOINT_RT_TESTS)
  find_package(GTest REQUIRED)
endif()
