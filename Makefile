# The two commands of the README: `make demo` and `make test`. Both set up .venv on a fresh clone.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check

.PHONY: demo demo-headless test lint bench clean

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit("serve-console needs Python >= 3.11" if sys.version_info < (3, 11) else 0)'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PIP) -e .
	@touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PIP) -e '.[test]'
	@touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/serve-console --demo

demo-headless: $(VENV)/.installed
	$(VENV)/bin/serve-console demo

# pytest-xdist workers for `make test` (docs/testing.md): sized for the 2-core build machine, whose tests
# mostly wait on engines and servers; the test hosts and the real vLLM stay on one worker (xdist groups).
TEST_WORKERS ?= 4

test: $(VENV)/.installed-test
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

bench: $(VENV)/.installed-test
	$(PY) bench/detect_latency.py
	$(PY) bench/tui.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
