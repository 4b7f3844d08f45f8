# Every dependency is a Debian package (scripts/install-deps.sh installs them); nothing is vendored.
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
find_package(PkgConfig REQUIRED)
pkg_check_modules(WEBP REQUIRED IMPORTED_TARGET libwebp)
