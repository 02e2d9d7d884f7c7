# One man page from clpipe's --help: cmake -DHELP2MAN=... -DCLPIPE=... -DCMD=train|"" -DVERSION=...
# -DOUT=... -DMAIN_C=tools/main.c -P man_page.cmake. help2man runs a program with --help; for a subcommand that program
# is a two-line wrapper `clpipe CMD "$@"`, named clpipe-CMD so that the page is.
if(CMD)
  set(name clpipe-${CMD})
  get_filename_component(dir ${OUT} DIRECTORY)
  set(prog ${dir}/wrap-${CMD}/${name})
  file(WRITE ${prog} "#!/bin/sh\nexec '${CLPIPE}' ${CMD} \"$@\"\n")
  file(CHMOD ${prog} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
  # the NAME line: the command's summary in tools/main.c's table
  file(STRINGS ${MAIN_C} row REGEX "{\"${CMD}\", cmd_")
  string(REGEX REPLACE ".*cmd_[a-z_]+, \"([^\"]*)\".*" "\\1" section "${row}")
else()
  set(name clpipe)
  set(prog ${CLPIPE})
  set(section "pipeline-parallel transformer training on OpenCL")
endif()
# a sanitizer build's leak report at exit would fail help2man (tools/test.sh's build-asan)
set(ENV{ASAN_OPTIONS} "detect_leaks=0")
execute_process(COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section=1
                        --version-string=${VERSION} --name=${section} --source=clpipe
                        --manual=clpipe --output=${OUT} ${prog}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(CMD)
  file(REMOVE_RECURSE ${dir}/wrap-${CMD})
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "help2man ${name}: ${err}")
endif()
