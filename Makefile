# The two commands of the README: `make run` (the system, locally) and `make test` (every test tier).
# Everything else they need is installed from this repository's own files: uv into .tools/, the Python
# environment from uv.lock into .venv/, the CDK CLI from package-lock.json into node_modules/.
SHELL := /bin/bash
PYTHON ?= python3
UV := .tools/bin/uv
RUN := $(UV) run --frozen --no-sync
ARGS ?=

export UV_PROJECT_ENVIRONMENT := .venv
export UV_PYTHON_DOWNLOADS := never
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: install run consumer cli test lint typecheck format synth unit integration infra e2e bench capacity

$(UV):
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet --disable-pip-version-check uv==0.13.9

.venv/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --quiet
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

install: .venv/.synced node_modules/.installed

run: install
	@$(RUN) python -m local $(ARGS)

# The demo webhook consumer of the README's walkthrough, e.g. make consumer ARGS='--port 9000 --secret whsec_…'
consumer: install
	@$(RUN) python -m local.consumer $(ARGS)

# The client's CLI, e.g. make cli ARGS='deliveries list --status dead' (HOOKRELAY_URL and HOOKRELAY_TOKEN from the env)
cli: install
	@PYTHONPATH=client $(RUN) python -m hookrelay_client $(ARGS)

test: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy
	$(RUN) pytest $(ARGS)

unit: install
	$(RUN) pytest tests/unit $(ARGS)

integration: install
	$(RUN) pytest tests/integration $(ARGS)

infra: install
	$(RUN) pytest tests/infrastructure $(ARGS)

e2e: install
	$(RUN) pytest tests/e2e $(ARGS)

lint: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .

# mypy, strict on lambdas/ (the settings are [tool.mypy] in pyproject.toml)
typecheck: install
	$(RUN) mypy

format: install
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

synth: install
	npx cdk synth --quiet $(ARGS)

# The benchmarks of bench/README.md (measured figures, printed; not part of make test), a few minutes in all.
bench: install
	$(RUN) python bench/run_all.py

# The capacity model (docs/capacity.md): each quota's utilisation for a workload, the first to saturate, the cost,
# checked by a simulation; e.g. make capacity ARGS='--rate 10000 --fanout 10 --failing 0.01'. Under a minute.
capacity: install
	$(RUN) python bench/capacity.py $(ARGS)
