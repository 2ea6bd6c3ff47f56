# The two commands a newcomer needs: `make demo` (serve the portal with demo data) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: demo test lint imports typecheck checks pytest install clean

$(BIN)/python:
	$(PYTHON) -c 'import sys; sys.exit("Python 3.11 or newer is required") if sys.version_info < (3, 11) else None'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when the dependencies change. requirements.lock pins every transitive package.
$(STAMP): pyproject.toml requirements.lock | $(BIN)/python
	$(BIN)/python -m pip install --quiet -c requirements.lock -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	PORTAL_ENV=demo $(BIN)/python manage.py migrate --no-input -v 0
	PORTAL_ENV=demo $(BIN)/python manage.py seed_demo
	PORTAL_ENV=demo $(BIN)/python manage.py rundemo --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The import rules between the rooms (pyproject.toml [tool.importlinter], docs/architecture.md).
imports: $(STAMP)
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy .

checks: $(STAMP)
	DJANGO_SETTINGS_MODULE=portal.settings_test $(BIN)/python manage.py check --fail-level WARNING
	DJANGO_SETTINGS_MODULE=portal.settings_test $(BIN)/python manage.py makemigrations --check --dry-run

# Three processes (pytest-xdist): the suite waits on real workers, clusters and browsers more than on the CPU.
# Each process has its own test database, Celery queue and cache prefix (tests/conftest.py, settings_test.py).
PYTEST_WORKERS ?= 3
pytest: $(STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS)

test: lint imports typecheck checks pytest

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
