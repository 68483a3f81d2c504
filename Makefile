# tandem: the two commands of the README, and the targets behind them.
#   make serve   install what is missing, build, create the demo model, start the server
#   make test    install what is missing, build, run every test
# Both are safe to run again; each step says what it does.

BUILD      ?= build
JOBS       ?= $(shell nproc)
CUDA_ARCHS ?= 80;89;90a
MODEL      ?= models/demo
HOST       ?= 127.0.0.1
PORT       ?= 11434
CMAKE_ARGS ?=

.PHONY: serve test deps build configure gpu demo-model clean format

serve: build demo-model
	@echo "[make] starting tandem on http://$(HOST):$(PORT) with $(MODEL)"
	./$(BUILD)/tandem serve --model $(MODEL) --host $(HOST) --port $(PORT)

test: build
	@echo "[make] running all tests"
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

deps:
	@bash scripts/setup.sh

configure: deps
	@echo "[make] configuring $(BUILD)/"
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release "-DTANDEM_CUDA_ARCHS=$(CUDA_ARCHS)" $(CMAKE_ARGS) >/dev/null

build: configure
	@echo "[make] building $(BUILD)/ with $(JOBS) jobs"
	@cmake --build $(BUILD) -j $(JOBS)

demo-model: build
	@if [ -f $(MODEL)/model.safetensors ]; then \
	  echo "[make] demo model: $(MODEL) present"; \
	else \
	  echo "[make] creating the demo model in $(MODEL)"; \
	  ./$(BUILD)/tandem testmodel --preset tiny --out $(MODEL); \
	fi

# A tandem for the GPU machine (Ubuntu 24.04): static libstdc++/libgcc/cudart and
# third-party libraries, dynamic libcublasLt.so.13 only.
gpu: deps
	@echo "[make] portable GPU build in build-gpu/ (archs $(CUDA_ARCHS))"
	@cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DTANDEM_PORTABLE=ON \
	  "-DTANDEM_CUDA_ARCHS=$(CUDA_ARCHS)" $(CMAKE_ARGS) >/dev/null
	@cmake --build build-gpu -j $(JOBS)

format:
	@git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) build-gpu
