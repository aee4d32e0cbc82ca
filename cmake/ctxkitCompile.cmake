# ctxkit_compile(): compiles ONNX models with ctxgen at build time, rerun exactly when one of its inputs changes.
#
#   ctxkit_compile(<name> MODELS <model>... [SHARE] [TARGET_DEVICE <npu-sim|cpu|file.json>] [OUTPUT_DIR <dir>]
#                  [OPTIONS <ctxgen args>...])
#
# Adds the custom target <name> (built by default) whose command runs ctxkit::ctxgen on the models and writes
# <stem>_ctx.onnx per model into OUTPUT_DIR (default: ${CMAKE_CURRENT_BINARY_DIR}/<name>) with its context binary
# (one shared <first stem>_ctxkit.bin with SHARE, else <stem>_ctxkit.bin each; none with embed mode 1).
# Relative model and target paths are taken from the current source folder. ctxgen writes a depfile naming every
# file it read (the models, their external data, the target file); the build reruns the command when one of them,
# ctxgen itself or the arguments change. The target's CTXKIT_OUTPUTS property lists the files it writes;
# CTXKIT_OUTPUT_DIR is OUTPUT_DIR.
#
# TARGET_DEVICE is a file when it ends in .json or names a folder, else a built-in target name.
# OPTIONS take any ctxgen option except those the function sets itself (-o, --depfile, --share, --target).

# Depfile paths as Ninja and Make expect them (relative to the build tree); functions keep the policies in effect
# where they are defined, so this holds whatever the calling project asks for.
if(POLICY CMP0116)
  cmake_policy(SET CMP0116 NEW)
endif()

function(ctxkit_compile name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "SHARE" "TARGET_DEVICE;OUTPUT_DIR" "MODELS;OPTIONS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ctxkit_compile(${name}): unexpected arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_MODELS)
    message(FATAL_ERROR "ctxkit_compile(${name}): MODELS names no model")
  endif()
  if(NOT TARGET ctxkit::ctxgen)
    message(FATAL_ERROR "ctxkit_compile(${name}): no ctxkit::ctxgen target; call find_package(ctxkit) first")
  endif()
  foreach(opt IN LISTS ARG_OPTIONS)
    if(opt MATCHES "^(-o|--output-dir|--depfile|--share|--target)(=.*)?$")
      message(FATAL_ERROR "ctxkit_compile(${name}): OPTIONS must not contain ${opt}; "
                          "use OUTPUT_DIR, SHARE and TARGET_DEVICE (the depfile is set by ctxkit_compile)")
    endif()
    # Options that move or rename the outputs would leave the declared outputs unwritten (rebuilt every time).
    if(opt MATCHES "ep\\.context_file_path|ep\\.share_ep_contexts|^--dry-run$|^--stop-after")
      message(FATAL_ERROR "ctxkit_compile(${name}): OPTIONS must not contain ${opt}: ctxkit_compile names the "
                          "outputs itself (<OUTPUT_DIR>/<stem>_ctx.onnx); use SHARE for shared contexts")
    endif()
  endforeach()

  set(out_dir "${ARG_OUTPUT_DIR}")
  if(NOT out_dir)
    set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/${name}")
  endif()
  cmake_path(ABSOLUTE_PATH out_dir BASE_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}" NORMALIZE)

  # ctxgen's embed mode 1 puts each context inside its _ctx.onnx: no .bin is written.
  string(JOIN " " joined_options ${ARG_OPTIONS})
  set(embedded FALSE)
  if(joined_options MATCHES "(^| )--embed-mode[= ]1( |$)" OR joined_options MATCHES "ep\\.context_embed_mode[=|]1")
    set(embedded TRUE)
  endif()

  set(models)
  set(outputs)
  set(bins)
  foreach(model IN LISTS ARG_MODELS)
    cmake_path(ABSOLUTE_PATH model BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" NORMALIZE)
    list(APPEND models "${model}")
    # ctxgen's stem drops the last extension only (model.v2.onnx -> model.v2), as cmake_path's LAST_ONLY does.
    cmake_path(GET model STEM LAST_ONLY stem)
    list(APPEND outputs "${out_dir}/${stem}_ctx.onnx")
    if(NOT embedded AND (NOT ARG_SHARE OR NOT bins))
      list(APPEND bins "${out_dir}/${stem}_ctxkit.bin")
    endif()
  endforeach()
  # The first model's _ctx.onnx stays the first OUTPUT: ctxgen names it first in the depfile, and Ninja takes a
  # depfile whose first target is not the rule's first output as out of date (rerunning on every build).
  list(APPEND outputs ${bins})

  set(target_args)
  set(target_file)
  if(ARG_TARGET_DEVICE)
    set(device "${ARG_TARGET_DEVICE}")
    if(device MATCHES "\\.json$" OR device MATCHES "/")
      cmake_path(ABSOLUTE_PATH device BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" NORMALIZE)
      set(target_file "${device}")
    endif()
    set(target_args --target "${device}")
  endif()
  set(share_arg)
  if(ARG_SHARE)
    set(share_arg --share)
  endif()

  set(depfile "${CMAKE_CURRENT_BINARY_DIR}/${name}.ctxkit.d")
  set(args ${models} ${share_arg} ${target_args} -o "${out_dir}" --force --depfile "${depfile}" ${ARG_OPTIONS})
  # The arguments, in a file rewritten only when they change: Make (unlike Ninja) does not track command lines.
  set(args_file "${CMAKE_CURRENT_BINARY_DIR}/${name}.ctxkit-args")
  string(JOIN "\n" args_text ${args})
  set(old_args_text "")
  if(EXISTS "${args_file}")
    file(READ "${args_file}" old_args_text)
  endif()
  if(NOT old_args_text STREQUAL args_text)
    file(WRITE "${args_file}" "${args_text}")
  endif()

  list(LENGTH models model_count)
  add_custom_command(
    OUTPUT ${outputs}
    COMMAND ctxkit::ctxgen ${args}
    DEPENDS ${models} ${target_file} "${args_file}" ctxkit::ctxgen
    DEPFILE "${depfile}"
    COMMENT "ctxkit_compile(${name}): compiling ${model_count} model(s) with ctxgen"
    VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${outputs})
  set_target_properties(${name} PROPERTIES CTXKIT_OUTPUTS "${outputs}" CTXKIT_OUTPUT_DIR "${out_dir}")
endfunction()
