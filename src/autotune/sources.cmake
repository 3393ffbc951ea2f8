# The autotuner's host sources, part of the flash library target. Included
# by the top-level CMakeLists.txt after add_library(flash ...).
target_sources(flash PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cache_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cache_json_read.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tune_cache.cpp)
