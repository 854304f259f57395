# keyshared: `make verify` runs the quick main job (every part of the kit once, about a minute), `make verify-all`
# the whole self-check (`keyshared verify --full`, half an hour or more), `make test` runs the tests.
# Both create (once) and reuse a local virtual environment in .venv with the pinned dependencies.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: verify verify-all test test-slow test-mutants lint bench java-check clean conformance-procrastinate conformance-rabbitmq

verify: java-check $(STAMP)
	$(BIN)/keyshared verify

verify-all: java-check $(STAMP)
	$(BIN)/keyshared verify --full

# Two pytest-xdist workers, each taking whole test files (module fixtures such as the TLC quick tier and the
# mutant sample run once).
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" -n 2 --dist loadfile

# The slow tier: the whole self-check first (its summary table names what failed), then the slow tests.
test-slow: verify-all
	$(BIN)/python -m pytest -q -m slow

test-mutants: $(STAMP)
	$(BIN)/python -m pytest -q -m mutants tests/test_conformance_mutants.py

lint: $(STAMP)
	$(BIN)/ruff check cli spec models reference conformance spark tests benchmarks
	$(BIN)/ruff format --check cli spec models reference conformance spark tests benchmarks
	$(BIN)/mypy cli/keyshared spec/ks_spec models/ks_models reference/ks_reference conformance/ks_conformance spark/ks_spark

bench: $(STAMP)
	$(BIN)/python -m benchmarks

# The conformance suite against procrastinate on a private PostgreSQL cluster (started here, stopped even on
# failure): writes the Markdown report and the replayable scenarios beside the adapter. Exits 0 when the run
# reached a verdict (conformant or not), non-zero when it could not (no PostgreSQL, an adapter fault).
PROCRASTINATE := conformance/adapters/procrastinate
conformance-procrastinate: $(STAMP)
	@export KS_PG_STATE="$${KS_PG_STATE:-/tmp/ks-procrastinate-pg-make-$$$$}"; \
	trap '$(PROCRASTINATE)/postgres.sh stop' EXIT; \
	KS_PROCRASTINATE_DSN="$$($(PROCRASTINATE)/postgres.sh start)" || exit 1; \
	export KS_PROCRASTINATE_DSN; \
	rm -rf $(PROCRASTINATE)/scenarios; \
	$(BIN)/keyshared conformance run --adapter cmd:"$(BIN)/python $(PROCRASTINATE)/adapter.py" --profile ci --seed 0 \
	  --markdown $(PROCRASTINATE)/REPORT.md --scenarios $(PROCRASTINATE)/scenarios; \
	status=$$?; [ $$status -le 1 ] || exit $$status

# The conformance suite against RabbitMQ's key-ordered consumers recipe on a private node (started here, stopped even
# on failure), once per queue type (QUEUE_TYPE=classic or quorum; both by default): REPORT-<type>.md and the scenarios
# beside the adapter. EXAMPLES=N sets the budget (--examples N). Exits 0 when every run reached a verdict.
RABBITMQ := conformance/adapters/rabbitmq
QUEUE_TYPE ?= classic quorum
# Runs are without broker crashes unless RESTART=1: shrinking a crash scenario costs about 8 s a replay on classic
# queues (a ci run with crashes takes hours), and after a crash a quorum queue is never served again, each consume on
# it taking a minute to fail (a defect, REPORT.md). The crash runs' scenarios are kept in crash-classic/ and
# defects-quorum/, two of an earlier classic run in defects-classic/; runs never rewrite them.
RESTART ?=
# 20 examples per stratum and round: quorum queues took 10 minutes on two cores, classic ones (nothing found in the
# first round) under one; REPORT-classic.md was written with EXAMPLES=100 (10 minutes).
EXAMPLES ?= 20
# QOS=per-consumer: a prefetch per queue instead of one per consumer (classic queues' default is global QoS, which
# RabbitMQ deprecated; quorum queues only take per-consumer); its report and scenarios get the suffix -per-consumer.
QOS ?=
conformance-rabbitmq: $(STAMP)
	@export KS_RMQ_STATE="$${KS_RMQ_STATE:-/tmp/ks-rabbitmq-make-$$$$}"; \
	trap '$(RABBITMQ)/broker.sh stop' EXIT; \
	KS_RABBITMQ_URL="$$($(RABBITMQ)/broker.sh start)" || exit 1; \
	export KS_RABBITMQ_URL; \
	for type in $(QUEUE_TYPE); do \
	  run=$$type; flags="--queue-type $$type"; [ -z "$(RESTART)" ] && flags="$$flags --without-restart"; \
	  [ -n "$(QOS)" ] && { flags="$$flags --qos $(QOS)"; run="$$type-$(QOS)"; }; \
	  rm -rf $(RABBITMQ)/scenarios-$$run; \
	  $(BIN)/keyshared conformance run --adapter cmd:"$(BIN)/python $(RABBITMQ)/adapter.py $$flags" \
	    --profile ci --seed 0 --timeout 60 --examples $(EXAMPLES) \
	    --markdown $(RABBITMQ)/REPORT-$$run.md --scenarios $(RABBITMQ)/scenarios-$$run; \
	  status=$$?; [ $$status -le 1 ] || exit $$status; \
	done

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "keyshared needs Python 3.11 or newer: run make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[spark,dev,procrastinate,rabbitmq]'
	touch $(STAMP)

# Java 17+ runs TLC and Spark; fail early with one line saying how to get it.
java-check:
	@java -version 2>&1 | awk -F'"' '/version/ { split($$2, v, "."); major = (v[1] == "1") ? v[2] : v[1]; ok = (major + 0 >= 17) } END { exit ok ? 0 : 1 }' \
	  || { echo "keyshared: Java 17+ is required for TLC and Spark: install it (Debian/Ubuntu: apt-get install openjdk-17-jre-headless; macOS: brew install openjdk@17) and put java on PATH" >&2; exit 69; }

clean:
	rm -rf $(VENV) build *.egg-info .hypothesis

# The walk-through of examples/README.md: the toy adapter's smoke test and ci run (conformant), then its broken twin's
# checked-in report and scenarios written again (that run ends not conformant, exit 1: the expected verdict).
.PHONY: example
example: $(STAMP)
	$(BIN)/keyshared conformance smoke --adapter cmd:"python3 examples/toy_adapter.py"
	$(BIN)/keyshared conformance run --adapter cmd:"python3 examples/toy_adapter.py" --profile ci --seed 0
	rm -rf examples/scenarios
	@$(BIN)/keyshared conformance run --adapter cmd:"python3 examples/toy_adapter_broken.py" --profile ci --seed 0 \
	  --examples 10 --markdown examples/toy_adapter_broken.REPORT.md --scenarios examples/scenarios; \
	status=$$?; [ $$status -eq 1 ] || { echo "make example: the broken twin should end not conformant (exit 1), got $$status" >&2; exit 1; }
