# Each target sets itself up on a fresh machine: it creates .venv and installs fathom into it.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,openai]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check src tests examples
	$(BIN)/pytest -q; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

demo: $(STAMP)
	$(BIN)/python -m fathom.demo

lint: $(STAMP)
	$(BIN)/ruff check src tests examples

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
