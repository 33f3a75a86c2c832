PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install -c constraints.txt
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
DOCS_STAMP := $(VENV)/.installed-docs

.PHONY: demo test bench install clean browser docs

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml constraints.txt $(wildcard hierfl/compress/*.[ch])
	$(PIP) -q -e .
	touch $(STAMP)

# the tests also need pytest, hypothesis and Ray (a real local Ray cluster in tests/test_ray.py),
# and MkDocs (tests/test_docs_site.py builds the site)
$(DEV_STAMP): $(STAMP)
	$(PIP) -q -e ".[dev,ray,docs]"
	touch $(DEV_STAMP)

$(DOCS_STAMP): $(STAMP)
	$(PIP) -q -e ".[docs]"
	touch $(DOCS_STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/hierfl run scenarios/quickstart.yaml

# pytest-xdist: one test process per core (at most 8; none on one core: -n 0 runs in-process);
# `make test TEST_JOBS=0` runs serially. --dist loadgroup keeps the tests marked `ray` in one
# process (tests/conftest.py), so two Ray clusters never start at once.
TEST_JOBS ?= $(shell $(PY) -c "import os; n = len(os.sched_getaffinity(0)) if hasattr(os, \
  'sched_getaffinity') else os.cpu_count() or 1; print(min(n, 8) if n > 1 else 0)")

test: $(DEV_STAMP) browser
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadgroup

# The report's browser test loads report.html in Chromium (Debian's package). Installed when
# missing; without root (or without network) that one test is skipped, with a note here.
browser:
	@command -v chromium >/dev/null 2>&1 || ( [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) ) || \
	  echo "note: chromium is not installed (apt-get install -y chromium needs root);" \
	       "tests/test_report.py's browser test will be skipped"

# The documentation site, from docs/ and mkdocs.yml, into site/ (open site/index.html). Offline:
# no fonts, scripts or inventories are fetched. --strict: a broken link or anchor is an error.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

bench: $(DEV_STAMP)
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/scale.py      # W8 (100k clients), W9 (city_scale, 1M), BUILD
	$(BIN)/python benchmarks/engine.py     # trace events per engine CPU second (timing: events)

clean:
	rm -rf $(VENV) reports/*/ site/
