# Every dependency comes from a Debian package installed by scripts/setup.sh.
find_package(Threads REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Boost 1.74 REQUIRED)
# Debian's CPython (/usr/bin/python3), never whatever python3 comes first on PATH.
set(Python3_EXECUTABLE /usr/bin/python3 CACHE FILEPATH "Debian's python3" FORCE)
find_package(Python3 REQUIRED COMPONENTS Interpreter Development.Embed Development.Module)
find_package(pybind11 CONFIG REQUIRED)
# The load generator's answer reader (server/internal/answer_head.h): libsimdjson-dev.
find_package(simdjson CONFIG REQUIRED)
find_path(ENVFORGE_DOCTEST_INCLUDE doctest/doctest.h REQUIRED)
find_library(ENVFORGE_SECCOMP_LIB seccomp REQUIRED)
find_path(ENVFORGE_SECCOMP_INCLUDE seccomp.h REQUIRED)
# Jupyter kernels (sandbox/jupyter): libzmq3-dev and the header-only cppzmq-dev.
find_library(ENVFORGE_ZMQ_LIB zmq REQUIRED)
find_path(ENVFORGE_CPPZMQ_INCLUDE zmq_addon.hpp REQUIRED)
# Regular expressions (base/regex): libonig-dev.
find_library(ENVFORGE_ONIG_LIB onig REQUIRED)
find_path(ENVFORGE_ONIG_INCLUDE oniguruma.h REQUIRED)
# Capabilities (sandbox): libcap-dev.
find_library(ENVFORGE_CAP_LIB cap REQUIRED)
find_path(ENVFORGE_CAP_INCLUDE sys/capability.h REQUIRED)
