# The two set-up commands: `make run` and `make test`. Each creates or reuses .venv; `make run`
# installs what running needs (the package), `make test` adds the test and lint tools.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HASH := $(shell cksum < pyproject.toml | cut -d' ' -f1)
RUN_STAMP := $(VENV)/.installed-run-$(HASH)
DEV_STAMP := $(VENV)/.installed-dev-$(HASH)

.PHONY: run test test-newest lint typecheck check clean bench bench-quick chaos

# What running needs: tidings and its dependencies, nothing else.
$(RUN_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	@rm -f $(VENV)/.installed-run-*
	@touch $@

# The tests, linters and benchmarks need the dev extra too; it includes what running needs.
$(DEV_STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@ $(RUN_STAMP)

run: $(RUN_STAMP)
	$(BIN)/tidings serve

# The tests run in this many processes (pytest-xdist), each with its own PostgreSQL database:
# alone they kept about one of two cores busy (24 min here), two take 12.
TEST_PROCESSES ?= 2
test: $(DEV_STAMP)
	$(BIN)/python -m pytest -n $(TEST_PROCESSES) --dist worksteal

# The newest Python 3 on the machine beside the venv's, for the tests of what changed between
# versions: the address rules (3.13 reads 2002::/16 otherwise), sqlite3's parameters (3.12
# warns of numbered ones given a sequence, 3.14 refuses them) and unclosed connections (3.13
# warns), the collector's thresholds. Skipped where there is none.
NEWEST_PYTHON ?= $(shell for p in python3.14 python3.13 python3.12 \
	$$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); \
	do $$p -c '' >/dev/null 2>&1 && { echo $$p; break; }; done)
NEWEST_TESTS = tests/channels/test_netguard.py tests/test_heap.py tests/cli/test_schema.py \
	tests/store/test_outcomes.py tests/dispatch/test_claim_gate.py
test-newest:
	@if [ -z "$(NEWEST_PYTHON)" ]; then echo "test-newest: no Python 3.12 or newer here; skipped"; \
	else set -e; echo "test-newest: $(NEWEST_PYTHON)"; \
		test -x .venv-newest/bin/python || $(NEWEST_PYTHON) -m venv .venv-newest; \
		.venv-newest/bin/python -m pip install --quiet --upgrade pip; \
		.venv-newest/bin/python -m pip install --quiet -e '.[dev]'; \
		.venv-newest/bin/python -m pytest -n $(TEST_PROCESSES) -p no:cacheprovider $(NEWEST_TESTS); \
	fi

bench: $(DEV_STAMP)
	$(BIN)/python -m bench

bench-quick: $(DEV_STAMP)
	$(BIN)/python -m bench --quick

# The full chaos mix (minutes, not in CI): faults at random with a printed seed, the ledger's
# table, chaos/results/latest.json. Pass options through CHAOS, e.g. CHAOS="--minutes 10".
CHAOS ?=
chaos: $(DEV_STAMP)
	$(BIN)/python -m tests.chaos $(CHAOS)

# ruff, then the layer contracts of pyproject.toml's [tool.importlinter] (STYLE.md's layers).
lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/lint-imports

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

check: lint typecheck test

clean:
	rm -rf $(VENV) .venv-newest .pytest_cache .mypy_cache .ruff_cache .hypothesis
