# The two commands a user needs: `make run` and `make test`. Both install missing Debian
# packages first (scripts/install-deps.sh), build with CMake + Ninja, and never download code.

BUILD_DIR ?= build
ASAN_DIR  ?= build-asan
FUZZ_SECONDS ?= 10
SIM       ?= 8
JOBS      ?= $(shell nproc)
# Tests mostly wait on sockets, child processes and deadlines (a phase uses well under a core per
# test), so they run several per core.
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 3 )))
CTEST     := ctest --output-on-failure --timeout 300 -j $(TEST_JOBS)

.PHONY: all deps test-deps build run deb test check check-run asan asan-build asan-run fuzz \
  fuzz-build fuzz-run bench bench-goals screenshots format clean

all: build

deps:
	@bash scripts/install-deps.sh build

test-deps:
	@bash scripts/install-deps.sh test

# Configure once; afterwards Ninja re-runs CMake by itself when a CMakeLists.txt changes.
$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACCELMON_WERROR=ON

# One clang build with AddressSanitizer + UndefinedBehaviorSanitizer serves both the sanitizer
# tests and the libFuzzer targets (clang compiles it in about half GCC's time at -O0).
$(ASAN_DIR)/build.ninja:
	CXX=clang++ cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DACCELMON_SANITIZE=ON \
	  -DACCELMON_WERROR=ON

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR)

# Starts agent and exporter in one process with $(SIM) simulated devices; Ctrl-C stops it.
run: build
	./$(BUILD_DIR)/accelmon standalone --sim $(SIM)

# The Debian package $(BUILD_DIR)/accelmon_<version>_<arch>.deb (CPack, deploy/debian/;
# docs/deployment.md "Debian package"). cpack packages what `build` made and builds nothing.
deb: build
	cd $(BUILD_DIR) && cpack -G DEB

# Every test: unit, integration and end-to-end on the release build, then unit and
# integration again under AddressSanitizer + UndefinedBehaviorSanitizer, then a short fuzz run
# of every procfs/sysfs parser. scripts/test.sh overlaps a build with the tests that mostly
# wait (and prints the time of each phase); the targets below run one part each.
test: test-deps
	@bash scripts/test.sh

check: test-deps build check-run
check-run:
	$(CTEST) --test-dir $(BUILD_DIR) --output-junit $(abspath $(BUILD_DIR))/ctest-junit.xml \
	  -L 'unit|integration|e2e'

# The Python client, the promtool lint and the checks of the tree itself (pipes, include
# circles, the rooms' links) have no C++ to sanitise: they run in `check` only.
# ReconnectTest measures how soon the agent is back after an outage against gRPC's backoff
# schedule: under the sanitizers, beside the fuzz run, it measures the sanitizers (a 1 s outage
# took 1.6 s there); the release run keeps it.
# The sanitizer build runs one compiler per core (not Ninja's cores + 2): in `make test` it runs
# beside the release tests, whose end-to-end scripts wait on real time.
asan: test-deps asan-build asan-run
asan-build: $(ASAN_DIR)/build.ninja
	cmake --build $(ASAN_DIR) -j $(JOBS) --target unit_tests diagnostics_tests integration_tests fuzz_targets
asan-run:
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(CTEST) --test-dir $(ASAN_DIR) --output-junit $(abspath $(ASAN_DIR))/ctest-junit.xml \
	  -L 'unit|integration' -E 'golden_passes_promtool|python_push_test|ReconnectTest|forbidden_room_links|includes_form_no_circles|shell_pipes_never'

# libFuzzer over every parser, $(FUZZ_SECONDS) s each (longer: make fuzz FUZZ_SECONDS=600).
# The targets live in the sanitizer build ($(ASAN_DIR)).
fuzz: test-deps fuzz-build fuzz-run
fuzz-build: $(ASAN_DIR)/build.ninja
	cmake --build $(ASAN_DIR) --target fuzz_targets
fuzz-run:
	bash tests/fuzz/run.sh $(ASAN_DIR) $(FUZZ_SECONDS)

# Benchmarks against their peers; see bench/README.md.
bench: test-deps build
	cmake --build $(BUILD_DIR) --target benchmarks
	bash bench/run.sh $(BUILD_DIR)

# The core path's goals only (issue 39), each against its anchor, ending with one met/missed table (~5 min).
bench-goals: test-deps build
	cmake --build $(BUILD_DIR) --target benchmarks
	bash bench/goals.sh $(BUILD_DIR)

# The README's pictures of the status page and `accelmon top` (docs/images/), made by their tests.
screenshots: test-deps build
	bash scripts/screenshots.sh $(BUILD_DIR)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR)
