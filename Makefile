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
# jsii's end-of-life banner for this Node (a box of "!!" lines, which jsii's Python side re-prints as byte strings):
# silenced for the running major version; `make synth` says it in one line instead (NODE_NOTE).
NODE_MAJOR := $(shell node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := $(NODE_MAJOR)
NODE_NOTE := node -e 'const v = process.versions.node; if (+v.split(".")[0] < 22) console.error(`note: Node $${v} is \
	past its end of life for the CDK (jsii supports 22 and 24): it still synthesizes; upgrade Node when you can`)'
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: install run consumer cli test lint typecheck format synth rehearse deploy unit integration infra e2e bench bench-readme capacity browser screenshots dist

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

# The client's CLI, e.g. make cli ARGS='deliveries list --status dead' (HOOKRELAY_URL and HOOKRELAY_TOKEN from the env).
# make exits 2 whenever a recipe fails, whatever the CLI's code (its "Error N" line names it): scripts that branch on
# the CLI's exit codes run bin/hookrelay, which this target execs.
cli: install
	@exec bin/hookrelay $(ARGS)

# The tiers that run in one process each go to TEST_WORKERS pytest-xdist workers (one per core); the end-to-end
# tier runs after them, alone: its local stacks start processes of their own, which workers beside it would crowd.
TEST_WORKERS ?= 2

test: install browser
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy
	$(RUN) python -m scripts.rehearse
	$(RUN) pytest -n $(TEST_WORKERS) --ignore=tests/e2e $(ARGS)
	$(RUN) pytest tests/e2e $(ARGS)

unit: install
	$(RUN) pytest tests/unit $(ARGS)

integration: install
	$(RUN) pytest tests/integration $(ARGS)

infra: install
	$(RUN) pytest tests/infrastructure $(ARGS)

e2e: install browser
	$(RUN) pytest tests/e2e $(ARGS)

# Headless Chromium for the portal's browser tests (tests/e2e/test_portal.py) and screenshots: Debian's packages,
# installed when missing and this is root with apt-get; otherwise the reason is printed and those tests skip.
browser:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing chromium and chromium-driver (the portal's browser tests)"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			chromium chromium-driver >/dev/null) || echo "could not install chromium: the browser tests will skip"; \
	else echo "chromium not installed and not installable here (needs root and apt-get): the browser tests will skip"; fi

# The portal's screenshots at desktop and phone width (docs/portal-*.png, shown in the README).
screenshots: install browser
	$(RUN) python -m scripts.portal_screenshots $(ARGS)

lint: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .

# mypy, strict on lambdas/ (the settings are [tool.mypy] in pyproject.toml)
typecheck: install
	$(RUN) mypy

format: install
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

# The construct library's wheel (docs/embedding.md): dist/hookrelay-<version>-py3-none-any.whl, with the Lambda
# requirements locked in uv.lock written into it (an installed wheel has no uv.lock to read them from).
dist: install
	$(RUN) python -m stacks.lambda_asset --write-requirements
	rm -f dist/hookrelay-*.whl
	$(UV) build --wheel --out-dir dist

# The deployment stage: deploy/$(STAGE).json holds its settings (stack name, alarm address, concurrency, ...).
STAGE ?= dev

synth: install
	@$(NODE_NOTE)
	npx cdk synth --quiet -c stage=$(STAGE) $(ARGS)

# The deploy rehearsal (part of make test): synth of the stage with cdk-nag, cfn-lint, asl-validator on the workflow
# as deployed, and its role checked against its tasks; a one-screen summary. No AWS account.
rehearse: install
	@$(NODE_NOTE)
	$(RUN) python -m scripts.rehearse --stage $(STAGE)

# Deploy the stage (scripts/deploy.py): the account's Lambda concurrency checked against the stage's settings,
# bootstrap when needed, cdk deploy, the outputs, the first admin key. Credentials and region from the environment.
deploy: install
	@$(NODE_NOTE)
	$(RUN) python -m scripts.deploy --stage $(STAGE) $(ARGS)

# The benchmarks of bench/README.md (measured figures, printed; not part of make test), a few minutes in all.
bench: install
	$(RUN) python bench/run_all.py

# bench/README.md from bench/readme_intro.md and each benchmark's latest recorded output (bench/results/*.txt, which
# make bench writes); make bench rewrites it itself.
bench-readme: install
	$(RUN) python -m bench.readme

# The capacity model (docs/capacity.md): each quota's utilisation for a workload, the first to saturate, the cost,
# checked by a simulation; e.g. make capacity ARGS='--rate 10000 --fanout 10 --failing 0.01'. Under a minute.
capacity: install
	$(RUN) python bench/capacity.py $(ARGS)
