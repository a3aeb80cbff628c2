# The two commands a user needs: `make run` and `make test`. Both install missing Debian
# packages first (scripts/install-deps.sh), build with CMake + Ninja, and never download code.

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
SIM       ?= 8
JOBS      ?= $(shell nproc)
CTEST     := ctest --output-on-failure --timeout 300 -j $(JOBS)

.PHONY: all deps configure build run test check asan format clean

all: build

deps:
	@bash scripts/install-deps.sh

# Configure once; afterwards Ninja re-runs CMake by itself when a CMakeLists.txt changes.
$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACCELMON_WERROR=ON

$(ASAN_DIR)/build.ninja:
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DACCELMON_SANITIZE=ON \
	  -DACCELMON_WERROR=ON

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR)

# Starts agent and exporter in one process with $(SIM) simulated devices; Ctrl-C stops it.
run: build
	./$(BUILD_DIR)/accelmon standalone --sim $(SIM)

# Every test: unit, integration and end-to-end on the release build, then unit and
# integration again under AddressSanitizer + UndefinedBehaviorSanitizer.
test: check asan

check: build
	$(CTEST) --test-dir $(BUILD_DIR) -L 'unit|integration|e2e'

asan: deps $(ASAN_DIR)/build.ninja
	cmake --build $(ASAN_DIR) --target unit_tests integration_tests
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(CTEST) --test-dir $(ASAN_DIR) -L 'unit|integration' -E golden_passes_promtool

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
