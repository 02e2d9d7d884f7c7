# Installing clpipe like any Debian tool (issue 31): `cmake --install build --prefix P` puts the
# command in P/bin, the docs in P/share/doc/clpipe, one man page per subcommand (made from its
# --help by help2man at build time) in P/share/man/man1; `cpack -G DEB` in the build tree makes
# a .deb for /usr whose Depends are the Debian libraries the binary links (dpkg-shlibdeps) plus
# an OpenCL driver. The kernels and tuning tables are embedded in the binary (cl/CMakeLists.txt),
# so nothing else is needed at run time.
include(GNUInstallDirs)

install(TARGETS clpipe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
file(GLOB CLP_DOC_FILES ${CMAKE_SOURCE_DIR}/docs/*.md)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CLP_DOC_FILES} DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/figures DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${CMAKE_SOURCE_DIR}/tools/quickstart.toml ${CMAKE_SOURCE_DIR}/tools/slurm_train.sbatch
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# Man pages: clpipe(1) from `clpipe --help`, clpipe-CMD(1) from `clpipe CMD --help`.
find_program(HELP2MAN help2man)
option(CLPIPE_MAN "Generate man pages with help2man" ON)
if(CLPIPE_MAN AND NOT HELP2MAN)
  message(STATUS "help2man not found: no man pages (Debian package help2man; -DCLPIPE_MAN=OFF hides this)")
elseif(CLPIPE_MAN)
  set(CLP_MAN_COMMANDS devices train eval sample export tokenize bench tune kernels check sim skip plan)
  set(CLP_MAN_DIR ${CMAKE_BINARY_DIR}/man)
  set(CLP_MAN_PAGES ${CLP_MAN_DIR}/clpipe.1)
  add_custom_command(OUTPUT ${CLP_MAN_DIR}/clpipe.1
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CLP_MAN_DIR}
    COMMAND ${CMAKE_COMMAND} -DHELP2MAN=${HELP2MAN} -DCLPIPE=$<TARGET_FILE:clpipe> -DCMD=
            -DVERSION=${PROJECT_VERSION} -DMAIN_C=${CMAKE_SOURCE_DIR}/tools/main.c -DOUT=${CLP_MAN_DIR}/clpipe.1
            -P ${CMAKE_SOURCE_DIR}/cmake/man_page.cmake
    DEPENDS clpipe ${CMAKE_SOURCE_DIR}/cmake/man_page.cmake ${CMAKE_SOURCE_DIR}/tools/main.c
    COMMENT "Man page clpipe.1" VERBATIM)
  foreach(c ${CLP_MAN_COMMANDS})
    add_custom_command(OUTPUT ${CLP_MAN_DIR}/clpipe-${c}.1
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CLP_MAN_DIR}
      COMMAND ${CMAKE_COMMAND} -DHELP2MAN=${HELP2MAN} -DCLPIPE=$<TARGET_FILE:clpipe> -DCMD=${c}
              -DVERSION=${PROJECT_VERSION} -DMAIN_C=${CMAKE_SOURCE_DIR}/tools/main.c -DOUT=${CLP_MAN_DIR}/clpipe-${c}.1
              -P ${CMAKE_SOURCE_DIR}/cmake/man_page.cmake
      DEPENDS clpipe ${CMAKE_SOURCE_DIR}/cmake/man_page.cmake ${CMAKE_SOURCE_DIR}/tools/main.c
      COMMENT "Man page clpipe-${c}.1" VERBATIM)
    list(APPEND CLP_MAN_PAGES ${CLP_MAN_DIR}/clpipe-${c}.1)
  endforeach()
  add_custom_target(man ALL DEPENDS ${CLP_MAN_PAGES})
  install(FILES ${CLP_MAN_PAGES} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

# The Debian package. Depends: what dpkg-shlibdeps finds for the binary (libclblast1,
# libjansson4, libhwloc15, libopenmpi3, libopenblas0, ocl-icd-libopencl1 | libopencl1, libc6)
# and an OpenCL driver (PoCL on the CPU, or any other ICD); mpirun for pipelines is recommended.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME clpipe)
set(CPACK_PACKAGE_VENDOR clpipe)
set(CPACK_PACKAGE_CONTACT "clpipe maintainers <clpipe@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "pipeline-parallel transformer training on OpenCL")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "pocl-opencl-icd | opencl-icd")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "openmpi-bin")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "mesa-opencl-icd, slurm-client")
include(CPack)
