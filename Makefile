# Two commands on a fresh machine: `make run` (default GAL job) and `make test`.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint bench-quick clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade pip >/dev/null
	$(PY) -m pip install -e '.[dev,ray,xgboost]'
	touch $(STAMP)

run: $(STAMP)
	$(PY) train.py --overwrite

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench-quick: $(STAMP)
	$(PY) benchmarks/gal_uci.py --quick --out runs/bench/gal_uci_quick.json

clean:
	rm -rf runs
