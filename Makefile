# `make demo` runs the demo, `make test` runs every test. Both build .venv from scratch if needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test test-pythons lint typecheck unit system-deps layer cdk-range bench dist clean docs docs-serve

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# dynalease with its dev extra, and the development tools (dev/: the demo, `dynalease
# invoke`'s runner, the local Lambda control plane), a distribution of their own so the
# wheel and the layer carry the library only.
$(STAMP): pyproject.toml dev/pyproject.toml | $(BIN)/python
	@echo "make: installing dynalease and its dev tools into $(VENV) (about 100 s on a first run; once only)"
	$(BIN)/pip install --progress-bar on -e '.[dev]' -e ./dev
	touch $(STAMP)

# $(call debian_tool,CHECK,PACKAGE,WHAT NEEDS IT): install Debian's PACKAGE when the shell
# command CHECK fails (as root; otherwise say what to install); what needs it is skipped
# without it.
define debian_tool
@{ $(1); } >/dev/null 2>&1 || { \
  if [ "$$(id -u)" = 0 ]; then \
    echo "make: installing Debian's $(2) (apt-get install $(2)) for $(3)"; \
    (apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) >/dev/null) \
      || echo "warning: could not install $(2); $(3) will be skipped"; \
  else echo "warning: $(2) missing (apt-get install $(2)); $(3) will be skipped"; fi; }
endef

# libfaketime runs the clock-jump tests; Node runs dynalite and the CDK's jsii runtime;
# PostgreSQL (initdb, pg_ctl: the tests start their own cluster; Debian keeps them out of
# PATH) checks the fencing helpers; valgrind counts instructions (benchmarks/instructions.py).
system-deps:
	$(call debian_tool,ls /usr/lib/postgresql/*/bin/initdb || command -v initdb,postgresql,the PostgreSQL fencing tests)
	$(call debian_tool,command -v faketime,faketime,the clock-jump tests)
	$(call debian_tool,command -v chromium,chromium,the docs site's browser test)
	$(call debian_tool,command -v valgrind,valgrind,the instruction-count benchmark's test)
	@if command -v npm >/dev/null 2>&1 && [ ! -d tests/support/node/node_modules ] \
	    && [ -f tests/support/node/package.json ]; then \
	  echo "make: installing dynalite for the emulator tests (npm ci in tests/support/node)"; \
	  (cd tests/support/node && npm ci --no-audit --no-fund --silent) \
	    || echo "warning: npm ci failed; dynalite tests will be skipped"; fi

lint: $(STAMP)
	@echo "make: linting with ruff (check, then format --check)"
	$(BIN)/ruff check src dev tests benchmarks infra layer examples
	$(BIN)/ruff format --check src dev tests benchmarks infra layer examples

typecheck: $(STAMP)
	@echo "make: type-checking src/dynalease and dev/dynalease_dev with mypy --strict (about a minute on a cold cache)"
	$(BIN)/mypy

# `make test` runs in phases, each timed (tests/support/phase.sh and side_by_side.sh print
# the seconds each part took, and all of them again at the end). Work that keeps the cores
# busy runs beside work that mostly waits, each part's output kept apart:
# - the install of .venv and the system tools (pip on one core, its output shown as it
#   goes), beside the builds of the 3.12 and 3.13 venvs on the other;
# - ruff;
# - mypy and the unit, docs and CDK suites on two workers (CPU), side by side;
# - the integration, Lambda and CLI suites, which mostly wait (on leases, processes,
#   servers), on Python 3.11 (the lean request path, then the lock tests again over
#   botocore), 3.12 and 3.13 side by side, WAITING_WORKERS each (a file per worker at a
#   time; the timing, process and Lambda suites keep their bounds generous for that).
#   The CLI suite stays out of the CPU phase: its gc test keeps 900 rows renewing by
#   100-row transactions, which a moto server starved by mypy and two unit workers
#   answered too late (the leases expired and gc rightly deleted the rows).
# The Managed Instances tests run awslambdaric on Python 3.13 whatever runs the suite.
PYTHON313 = $$(bash tests/support/python_venv.sh 3.13)
WAITING_WORKERS ?= 3
TEST_PHASES := .venv/test-phases.txt
PHASE = TEST_PHASES=$(TEST_PHASES) bash tests/support/phase.sh
SIDE_BY_SIDE = TEST_PHASES=$(TEST_PHASES) bash tests/support/side_by_side.sh
test:
	@rm -f $(TEST_PHASES)
	@$(SIDE_BY_SIDE) \
	  "install (.venv, system tools)" --show -- $(MAKE) --no-print-directory -s $(STAMP) system-deps :: \
	  "venvs of $(OTHER_PYTHONS)" -- $(MAKE) --no-print-directory -j 2 $(OTHER_PYTHONS:%=venv-%)
	@$(PHASE) "lint (ruff)" $(MAKE) --no-print-directory lint
	@$(SIDE_BY_SIDE) \
	  "types (mypy)" -- $(MAKE) --no-print-directory typecheck :: \
	  "unit, docs and CDK suites (3.11, 2 workers)" -- \
	  $(BIN)/pytest -q -n 2 --dist loadfile -p no:cacheprovider tests/unit tests/docs tests/infra
	@$(SIDE_BY_SIDE) \
	  "integration, Lambda and CLI suites (3.11)" -- env DYNALEASE_PYTHON313=$(PYTHON313) \
	  $(BIN)/pytest -q -n $(WAITING_WORKERS) --dist loadfile -p no:cacheprovider \
	  tests/integration tests/lambda tests/cli :: \
	  $(foreach version,$(OTHER_PYTHONS),$(call OTHER_SUITES,$(version)) ::) \
	  "the lock tests over botocore (3.11)" -- env DYNALEASE_TRANSPORT=boto \
	  $(BIN)/pytest -q -p no:cacheprovider tests/integration/test_locks.py tests/integration/test_lock_examples.py
	@echo "make test: every phase passed"; cat $(TEST_PHASES)

# Lambda's Python runtimes besides the venv's (SnapStart needs 3.12+, Managed Instances
# 3.13+): each gets .venv-3.X with the test extra. A missing interpreter is skipped
# with a warning here and fails under CI=true. What differs by version is the runtime and
# the event loop the engine runs on, so the model tests explore 100 examples there (1,000
# on the main interpreter), without the checks of their own power (marked test_power)
# and the long crash histories across processes (marked process_history: the election's,
# the read/write, fair and semaphore locks', the soak's; they check the protocol between
# processes, which the shorter process tests exercise on each version already), and
# without the benchmarks' smoke test (the benchmarks run from the main venv).
OTHER_PYTHONS ?= 3.12 3.13
SUITES_ON_EVERY_PYTHON := tests/unit/engine tests/lambda tests/integration
OTHER_SUITES = "engine, Lambda and integration suites ($(1))" -- \
	  env DYNALEASE_PYTHON313=$(PYTHON313) DYNALEASE_MODEL_EXAMPLES=100 \
	  bash tests/support/other_python.sh $(1) -q -n $(WAITING_WORKERS) --dist loadfile \
	  -p no:cacheprovider -m "not test_power and not process_history" --ignore=tests/integration/test_benchmarks_smoke.py \
	  $(SUITES_ON_EVERY_PYTHON)
venv-%:
	@bash tests/support/python_venv.sh $* >/dev/null || [ "$${CI:-}" != true ]

test-pythons: system-deps
	@$(SIDE_BY_SIDE) $(foreach version,$(OTHER_PYTHONS),$(call OTHER_SUITES,$(version)) ::) \
	  "nothing more" -- true

unit: $(STAMP)
	$(BIN)/pytest tests/unit -q

demo: $(STAMP)
	$(BIN)/dynalease-dev demo

cdk-range: $(STAMP)
	bash infra/check_cdk_range.sh

# One zip per Python version, with that version's bytecode: `make layer` builds for the
# venv's Python, `make layer LAYER_PYTHON=3.13` for one version, `LAYER_PYTHON=all` for
# every version an interpreter is found for (PATH, pyenv, DYNALEASE_PYTHON_3_N).
LAYER_PYTHON ?=
layer: $(STAMP)
	$(BIN)/python layer/build.py $(if $(LAYER_PYTHON),--python $(LAYER_PYTHON))

# The documentation site (mkdocs.yml; docs/site.md): strict, so a broken link, anchor,
# snippet or reference fails the build. The test suite builds it too (tests/docs/test_site.py).
# NO_MKDOCS_2_WARNING: Material 9.x prints a banner about its end of life (2027-05-05) on
# every build; docs/site.md records that choice and the way to Zensical.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# A wheel and an sdist in dist/, for `pip install dist/dynalease-*.whl` elsewhere.
dist: $(STAMP)
	@echo "make: building the wheel and the sdist into dist/ (python -m build), then twine check"
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

clean:
	rm -rf $(VENV) .venv-3.* cdk.out layer/dist dist site .mypy_cache .pytest_cache .ruff_cache
