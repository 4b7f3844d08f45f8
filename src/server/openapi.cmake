# GET /openapi.json serves docs/openapi.json itself: the file is embedded into the executable when CMake configures
# (and again whenever it changes), so the served document and the documentation cannot differ.
set(_sprt_openapi_doc ${PROJECT_SOURCE_DIR}/docs/openapi.json)
file(READ ${_sprt_openapi_doc} SPRT_OPENAPI_JSON)
string(FIND "${SPRT_OPENAPI_JSON}" ")sprt_openapi\"" _sprt_openapi_clash)
if(NOT _sprt_openapi_clash EQUAL -1)
  message(FATAL_ERROR "${_sprt_openapi_doc} contains the raw-string delimiter )sprt_openapi\"")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_sprt_openapi_doc})
configure_file(${CMAKE_CURRENT_LIST_DIR}/openapi.cpp.in ${CMAKE_CURRENT_BINARY_DIR}/openapi.cpp @ONLY)
set(SPRT_OPENAPI_CPP ${CMAKE_CURRENT_BINARY_DIR}/openapi.cpp)
