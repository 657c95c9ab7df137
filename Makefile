# gymsmith — set-up and entry points. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Python extras installed into the venv; grows as the heavy parts land.
EXTRAS ?= dev,postgres,ray,gym,serve,mcp,train,trainers,browser,web
# Debian packages the installed parts need at run time (installed only when missing).
DEB_PACKAGES ?= postgresql chromium bubblewrap git
STAMP  := $(VENV)/.installed-$(EXTRAS)

.PHONY: setup system-packages demo lint test bench clean

setup: system-packages $(STAMP)

system-packages:
	@bash scripts/install-system-packages.sh $(DEB_PACKAGES)

# Reinstall only when the project metadata changes: `make setup` is idempotent and fast.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRAS)]"
	@touch $(STAMP)

demo: setup
	$(VENV)/bin/gymsmith demo

lint: setup
	$(PY) -m ruff check src tests benchmarks examples
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# Test workers (pytest-xdist); each test module runs whole on one worker. TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2

test: setup lint
	$(PY) -m pytest -q -ra --durations=15 -n $(TEST_WORKERS) --dist loadfile

bench: setup
	$(PY) benchmarks/ops_reset.py
	$(PY) benchmarks/scale.py
	$(PY) benchmarks/sandbox.py
	$(PY) benchmarks/web.py

clean:
	rm -rf $(VENV) runs .pytest_cache
