# The system libraries the build uses, each found with a message that names what to install
# when it is missing: the Debian package (tools/setup.sh installs the library's, tools/setup.sh
# --tests the tests' too) and, for other systems, the CMake variable that points at an
# installation (docs/INSTALL.md lists the packages of other distributions). Included by the top-level CMakeLists.txt.
#
# threelc_find_system_package(<package> DEBIAN <debian package> FOR <what needs it>
#                             [OPTIONAL] [WITHOUT <how to build without it>]
#                             [ARGS <find_package arguments...>])
# A required package that is missing stops the configuration with the message (so a pip
# install fails with it); for an OPTIONAL one THREELC_MISSING_<package> holds the message, for
# the caller to say what is left out. A macro, so that <package>_FOUND and find_package's
# other variables reach the caller. (No semicolons in the arguments: they would split.)
macro(threelc_find_system_package threelc_package)
  cmake_parse_arguments(threelc_find "OPTIONAL" "DEBIAN;FOR;WITHOUT" "ARGS" ${ARGN})
  find_package(${threelc_package} ${threelc_find_ARGS})
  unset(THREELC_MISSING_${threelc_package})
  if(NOT ${threelc_package}_FOUND)
    string(CONCAT threelc_find_text
      "${threelc_package} not found (${threelc_find_FOR}). On Debian or Ubuntu install "
      "${threelc_find_DEBIAN} (apt-get install ${threelc_find_DEBIAN}, or tools/setup.sh: "
      "the library's packages, and with --tests the tests' and UCX's). Elsewhere install ${threelc_package}'s "
      "development files and, if CMake does not find them, give their prefix: "
      "-D${threelc_package}_ROOT=<prefix> (pip: -Ccmake.define.${threelc_package}_ROOT=<prefix>)")
    if(threelc_find_WITHOUT)
      string(APPEND threelc_find_text ". ${threelc_find_WITHOUT}")
    endif()
    if(threelc_find_OPTIONAL)
      set(THREELC_MISSING_${threelc_package} "${threelc_find_text}")
    else()
      message(FATAL_ERROR "threelc: ${threelc_find_text}")
    endif()
  endif()
endmacro()
