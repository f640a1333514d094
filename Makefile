# Two commands on a fresh machine: `make run` (default GAL job) and `make test`, both installing from the lock
# (requirements.lock: every package and version, with hashes, that the suite passed with). `make lock` refreshes it.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LOCK := requirements.lock
# the lock's resolution: Python >= 3.10 on Linux (pyproject.toml's [tool.uv] environments), every extra
LOCK_FLAGS := --extra dev --extra ray --extra xgboost --universal --python-version 3.10 --generate-hashes \
	--no-python-downloads --quiet

.PHONY: run test lint lock bench-quick clean data

$(STAMP): $(LOCK) pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --upgrade pip >/dev/null
	$(PY) -m pip install --require-hashes -r $(LOCK)
	$(PY) -m pip install --no-deps --no-build-isolation -e .
	touch $(STAMP)

run: $(STAMP)
	$(PY) train.py --overwrite

# Fashion-MNIST's four IDX files (Debian's dataset-fashion-mnist package) where data.dataset=fashion_mnist reads them
FASHION := /usr/share/datasets/fashion-mnist
FASHION_RAW := data/FashionMNIST/raw
data:
	@test -d $(FASHION) || apt-get install -y dataset-fashion-mnist || sudo apt-get install -y dataset-fashion-mnist \
	  || { echo "make data: no apt here; put Fashion-MNIST's four IDX files in $(FASHION_RAW)/"; exit 2; }
	mkdir -p $(FASHION_RAW)
	for f in $(FASHION)/*-ubyte.gz; do gunzip -c $$f > $(FASHION_RAW)/$$(basename $$f .gz).part \
	  && mv $(FASHION_RAW)/$$(basename $$f .gz).part $(FASHION_RAW)/$$(basename $$f .gz); done

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# today's newest releases within pyproject.toml's ranges, then the pins that changed (< before, > after)
lock: $(STAMP)
	grep -E '^[a-z0-9]' $(LOCK) | sed 's/ *\\$$//' > $(VENV)/lock.before
	$(VENV)/bin/uv pip compile pyproject.toml $(LOCK_FLAGS) --upgrade -o $(LOCK)
	grep -E '^[a-z0-9]' $(LOCK) | sed 's/ *\\$$//' > $(VENV)/lock.after
	@diff $(VENV)/lock.before $(VENV)/lock.after && echo "lock: no version changed" || \
		echo "lock: the versions above changed; run make test before committing $(LOCK)"

bench-quick: $(STAMP)
	$(PY) benchmarks/gal_uci.py --quick --out runs/bench/gal_uci_quick.json

clean:
	rm -rf runs
