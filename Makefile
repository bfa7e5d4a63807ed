# Two commands for a newcomer: `make demo` and `make test`. Everything else is installed by `make setup`.
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
APT    := $(if $(filter 0,$(shell id -u)),,sudo) env DEBIAN_FRONTEND=noninteractive apt-get

.PHONY: setup browser demo test test-fast test-long test-cluster soak soak-s3 endurance lint typecheck docs docs-serve bench clean

setup: $(STAMP)
	$(BIN)/deltaflow setup
	$(BIN)/python tools/vendor_mermaid.py

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "setup: $(PYTHON) not found"; exit 1; }
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || $(MAKE) --no-print-directory browser
	@command -v java >/dev/null || { echo "setup: java (JDK 17+) not found"; exit 1; }
	@command -v mvn >/dev/null || { echo "setup: mvn (Maven) not found"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

browser:  # the headless browser of the dashboard's test: Chromium and its driver, from the OS's packages
	@command -v apt-get >/dev/null || { echo "setup: install chromium and chromedriver (no apt-get here)"; exit 1; }
	$(APT) install -y -q --no-install-recommends chromium chromium-driver \
	  || { $(APT) update -q && $(APT) install -y -q --no-install-recommends chromium chromium-driver; }

demo: setup
	$(BIN)/deltaflow demo $(ARGS)

test: setup docs
	$(BIN)/ruff check src tests benchmarks examples tools docs
	$(BIN)/mypy
	$(BIN)/pytest $(PYTEST_ARGS)

MKDOCS := NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs
docs: setup  # the documentation site into site/: strict (a broken link, a missing page or include fails)
	$(MKDOCS) build --strict --quiet

docs-serve: setup  # the site on http://127.0.0.1:8000, rebuilt on every change
	$(MKDOCS) serve

test-fast: setup
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

test-long: setup  # minutes of steady input with upkeep and a SIGKILL (not part of `make test`)
	$(BIN)/pytest -m long $(PYTEST_ARGS)

test-cluster: setup  # only the examples on a standalone cluster (master + 2 workers, one SIGKILLed), storage on S3 (~3 min; part of `make test`)
	$(BIN)/pytest -m cluster $(PYTEST_ARGS)

SOAK_MINUTES ?= 30
soak: setup  # clickstream + customers_cdc, continuous, SIGKILLs, upkeep; report in test-artifacts/soak.json
	DELTAFLOW_SOAK_MINUTES=$(SOAK_MINUTES) $(BIN)/pytest -m soak -s $(PYTEST_ARGS)

soak-s3: setup  # clickstream on the local S3 server failing a share of every request, SIGKILLs; test-artifacts/soak_s3.json
	DELTAFLOW_SOAK_MINUTES=$(SOAK_MINUTES) $(BIN)/pytest -m soak_s3 -s $(PYTEST_ARGS)

ENDURANCE_HOURS ?= 2
endurance: setup  # clickstream, continuous, no kills; memory, batch durations, disk areas sampled; test-artifacts/endurance.{json,png}
	$(BIN)/pip install -q -e '.[bench]'  # matplotlib, for the chart
	DELTAFLOW_ENDURANCE_HOURS=$(ENDURANCE_HOURS) $(BIN)/pytest -m endurance -s $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check src tests benchmarks examples tools docs
	$(BIN)/mypy

bench: setup  # every benchmark (~4 h on 2 cores, most of it compaction.py and freshness.py), then benchmarks/REPORT.md
	$(BIN)/pip install -q -e '.[bench]'  # SDP (the sdp_orders comparison) and the report's chart
	$(BIN)/python benchmarks/profile_pipeline.py
	$(BIN)/python benchmarks/bronze_ingest.py
	$(BIN)/python benchmarks/freshness.py
	$(BIN)/python benchmarks/gold_batches.py
	$(BIN)/python benchmarks/view_state.py
	$(BIN)/python benchmarks/cdc_merge.py
	$(BIN)/python benchmarks/growth.py
	$(BIN)/python benchmarks/quality.py
	$(BIN)/python benchmarks/compaction.py
	$(BIN)/python benchmarks/restart.py
	$(BIN)/python benchmarks/sdp_orders.py
	$(BIN)/python benchmarks/ui_latency.py
	$(BIN)/python benchmarks/report.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache deltaflow_demo
