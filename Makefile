# litemq: one entry point for building, testing, linting and benchmarking.
#
#   make demo    build everything into .venv and run the end-to-end demo
#   make test    every check CI runs (lint, cargo test, pytest)
#
# `make venv` creates .venv in the repository with the interpreter found as
# `python3` (override with PYTHON=...), installs the extras (test, spark, bench)
# and builds the extension with `maturin develop --release`. Stamp files inside
# .venv keep reruns fast: dependencies are reinstalled only when pyproject.toml
# changes, the extension is rebuilt only when a Rust source changes.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
PY := $(BIN)/python
EXTRAS := test spark bench

# The engine and the bindings; any change rebuilds the extension module.
RUST_SRC := $(shell find rust -name '*.rs' 2>/dev/null) Cargo.toml $(wildcard Cargo.lock)
DEPS_STAMP := $(VENV)/.stamp-deps
BUILD_STAMP := $(VENV)/.stamp-build

# pyo3's build script must see the venv's interpreter, whoever runs cargo.
export PYO3_PYTHON := $(PY)
export VIRTUAL_ENV := $(CURDIR)/$(VENV)
export PATH := $(BIN):$(PATH)

PY_SOURCES := python tests benches $(wildcard examples)

.PHONY: help venv deps build jar wheel demo test lint rust-test py-test stubtest fmt bench bench-peers fuzz fuzz-smoke soak clean

help:
	@echo "make demo         write 1M messages, follow them live from a second process, print a table"
	@echo "make test         lint + cargo test + pytest (what .ci/run runs)"
	@echo "make lint         cargo fmt/clippy, ruff, mypy, stubtest"
	@echo "make bench        cargo bench + every benches/*_bench.py"
	@echo "make bench-peers  litemq against other Python queues (benches/peers.py)"
	@echo "make fuzz         fuzz/run.sh"
	@echo "make venv         create .venv, install extras, build the extension"
	@echo "make wheel        build dist/litemq-*.whl (Linux) for pip install dist/litemq-*.whl"
	@echo "make fmt          apply cargo fmt and ruff format"

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Install maturin and every optional dependency named in pyproject.toml
# (read with tomllib, so the list lives in one place).
$(DEPS_STAMP): pyproject.toml | $(PY)
	$(PY) -c 'import tomllib, sys; \
	  p = tomllib.load(open("pyproject.toml", "rb")); \
	  reqs = list(p["build-system"]["requires"]); \
	  extras = p["project"]["optional-dependencies"]; \
	  [reqs.extend(extras[e]) for e in sys.argv[1:]]; \
	  print("\n".join(dict.fromkeys(reqs)))' $(EXTRAS) > $(VENV)/requirements.txt
	$(PY) -m pip install --quiet -r $(VENV)/requirements.txt
	touch $@

deps: $(DEPS_STAMP)

# `maturin develop` installs litemq in editable mode: python/litemq is used in
# place, and the compiled module is written next to it as _litemq.abi3.so.
$(BUILD_STAMP): $(DEPS_STAMP) $(RUST_SRC) pyproject.toml
	cd $(CURDIR) && $(BIN)/maturin develop --release --quiet
	touch $@

# The JVM reader for Spark (java/, docs/SPARK.md "The JVM reader"): plain javac + jar against
# the pyspark jars (no Maven artifacts), into the package so the wheel ships it as data.
JAR := python/litemq/spark/litemq-spark.jar
JAVA_SRC := $(shell find java -type f 2>/dev/null)
$(JAR): $(JAVA_SRC) | $(DEPS_STAMP)
	rm -rf target/java && mkdir -p target/java/classes
	javac --release 17 -nowarn -d target/java/classes \
	  -cp "$$($(PY) -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')/*" \
	  $$(find java/src -name '*.java')
	cp -r java/resources/. target/java/classes/
	jar --create --file $@ -C target/java/classes .

jar: $(JAR)

build venv: $(BUILD_STAMP) $(JAR)


# A wheel for this machine's platform (Linux only: the engine relies on Linux's
# mmap, futex and file-locking behaviour), in dist/, for any Python 3.11+ (abi3):
# `pip install dist/litemq-*.whl`, or with extras
# `pip install "$(ls dist/litemq-*.whl)[arrow]"`. Needs Rust and only the
# build-system requirement of pyproject.toml (maturin), not the extras.
wheel: | $(PY)
	$(PY) -m pip install --quiet $$($(PY) -c 'import tomllib; \
	  print(" ".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')
	$(MAKE) --no-print-directory jar
	rm -f dist/litemq-*.whl
	$(BIN)/maturin build --release --out dist
	ls dist/litemq-*.whl

demo: venv
	$(PY) -m litemq.demo

test: lint rust-test py-test fuzz-smoke

lint: venv
	cargo fmt --check
	cargo clippy --all-targets -- -D warnings
	cargo clippy --lib --features python -- -D warnings
	$(BIN)/ruff check $(PY_SOURCES)
	$(BIN)/ruff format --check $(PY_SOURCES)
	$(BIN)/mypy
	$(MAKE) --no-print-directory stubtest

stubtest: venv
	if [ -f .mypy-stubtest-allowlist ]; then \
	  $(PY) -m mypy.stubtest litemq._litemq --allowlist .mypy-stubtest-allowlist; \
	else \
	  $(PY) -m mypy.stubtest litemq._litemq; \
	fi

rust-test:
	cargo test

# The Spark suites run twice: against the Python source, then the JVM reader (the jar on the
# classpath). test_spark_conformance.py, test_spark_stream_jvm.py and test_typed_spark_jvm.py (marked jvm: the jar must be
# on the Spark JVM's classpath when it starts) run in the second pass only; they compare the Rust,
# JVM and Python readers, and the JVM and Python streaming sources.
SPARK_TWICE := tests/python/test_spark.py tests/python/test_spark_encryption.py \
  tests/python/test_batch_compression_spark.py tests/python/test_secondary_index_spark.py \
  tests/python/test_compaction_spark.py tests/python/test_arrow_spark.py \
  tests/python/test_spark_archive.py tests/python/test_spark_cluster.py \
  tests/python/test_spark_conformance.py tests/python/test_spark_stream_jvm.py \
  tests/python/test_typed_spark.py tests/python/test_typed_spark_jvm.py

py-test: venv
	$(PY) -m pytest
	LITEMQ_SPARK_READER=jvm $(PY) -m pytest -q $(SPARK_TWICE)

fmt: venv
	cargo fmt
	$(BIN)/ruff format $(PY_SOURCES)
	$(BIN)/ruff check --fix $(PY_SOURCES)

bench: venv
	cargo bench
	for f in benches/*_bench.py; do \
	  echo "== $$f"; \
	  $(PY) "$$f"; \
	done

bench-peers: venv
	$(PY) benches/peers.py

# Every fuzz target for a few seconds (replaying kept regression inputs first).
fuzz-smoke:
	bash fuzz/run.sh 5

# Long fuzzing runs: 60 s per target, or FUZZ_SECONDS.
fuzz:
	bash fuzz/run.sh $${FUZZ_SECONDS:-60}

# Thousands of kills, crash images and damaged queues instead of hundreds.
soak: venv
	SOAK=1 cargo test --release --test crash --test power_loss --test corruption
	SOAK=1 $(PY) -m pytest tests/python/test_crash.py

clean:
	rm -rf $(VENV) python/litemq/*.so
	cargo clean
