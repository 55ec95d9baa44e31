# Thin wrapper over CMake. `make demo` and `make test` are the README's two commands.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps configure build test demo clean format format-check

deps:
	@bash scripts/setup.sh

configure: deps
	@mkdir -p $(BUILD_DIR)
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) > $(BUILD_DIR)/configure.log 2>&1 || (cat $(BUILD_DIR)/configure.log; exit 1)

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

demo: build
	@bash scripts/demo.sh $(BUILD_DIR)

clean:
	rm -rf $(BUILD_DIR)

# C++ and CUDA sources in the house style (.clang-format); .ci/run checks it before the tests.
# The tracked files; in a tree without .git, the module directories' files.
FORMAT_FILES = $(shell git ls-files '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null || \
  find agents apps base bench envsynth inference kernels python sandbox server tests toolsets verifiers \
  -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh')

format-check: deps
	@test -n "$(FORMAT_FILES)" || { echo "format-check: no sources found" >&2; exit 1; }
	@clang-format --dry-run --Werror --style=file $(FORMAT_FILES) && echo "format: $(words $(FORMAT_FILES)) files as .clang-format says"

# Twice: clang-format 14 settles a few constructs only on its second pass.
format: deps
	@clang-format -i --style=file $(FORMAT_FILES) && clang-format -i --style=file $(FORMAT_FILES)
