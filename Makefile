# `make run` and `make test` set up everything they need on a fresh Debian machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Spark's own Kafka connector (../shared/clients-jvm) is built for Spark 4.0 and fails on newer
# Spark: its tests run in this second environment (extra `spark40`).
SPARK40_VENV := .venv-spark40
SPARK40_PY := $(SPARK40_VENV)/bin/python
SPARK40_STAMP := $(SPARK40_VENV)/.installed
# docker-compose 1.x (validates docker/*.yml in tests/ops) pins jsonschema<4; the schema registry
# needs jsonschema>=4.18, so the tool gets an environment of its own, without the project.
COMPOSE_VENV := .venv-compose
COMPOSE_STAMP := $(COMPOSE_VENV)/.installed
# Spark's Kafka connector and the Java client's jars: test tools kept outside the repository.
JVM_CLIENTS := ../shared/clients-jvm
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# The web console's charting library (uPlot), from the npm registry at the version pinned in
# kbroker/console/web/package-lock.json, installed into a build directory the console serves as
# static files (nothing from a CDN at run time).
CONSOLE_WEB := build/console-web
CONSOLE_ASSETS := $(CONSOLE_WEB)/node_modules/uplot/dist/uPlot.iife.min.js

.PHONY: install system-packages run test docker-test bench generate clean cluster spark-demo chaos \
        console-assets

install: system-packages $(STAMP) $(SPARK40_STAMP) $(COMPOSE_STAMP) console-assets

console-assets: $(CONSOLE_ASSETS)

$(CONSOLE_ASSETS): kbroker/console/web/package.json kbroker/console/web/package-lock.json
	mkdir -p $(CONSOLE_WEB)
	cp kbroker/console/web/package.json kbroker/console/web/package-lock.json $(CONSOLE_WEB)/
	cd $(CONSOLE_WEB) && npm ci --omit=dev --no-audit --no-fund --ignore-scripts
	touch $(CONSOLE_ASSETS)

# Debian packages the tests use: a JDK (ZooKeeper, Spark, Kafka, and javac for the Java client
# tests), ZooKeeper, kcat, iproute2 (network namespaces for the compose emulation and chaos
# runs), iptables (the chaos runs' partitions, and netavark's), venv for Debian's python3,
# podman with what it needs on this kind of VM plus debootstrap (the container tests build
# the image and stand-ins for the base images, tests/docker), npm (the web console's charting
# library, console-assets) and chromium (the console's browser tests drive it headless).
system-packages:
	@missing=""; \
	command -v javac >/dev/null || missing="$$missing default-jdk-headless"; \
	[ -x /usr/share/zookeeper/bin/zkServer.sh ] || missing="$$missing zookeeper"; \
	command -v kcat >/dev/null || missing="$$missing kcat"; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v iptables >/dev/null || missing="$$missing iptables"; \
	$(PYTHON) -c "import ensurepip" 2>/dev/null || missing="$$missing python3-venv"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	for pkg in podman buildah runc netavark aardvark-dns slirp4netns fuse-overlayfs debootstrap \
	           uidmap catatonit; do \
	  dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(STAMP): pyproject.toml
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,spark]'
	touch $(STAMP)

$(SPARK40_STAMP): pyproject.toml
	[ -x $(SPARK40_PY) ] || $(PYTHON) -m venv $(SPARK40_VENV)
	$(SPARK40_PY) -m pip install -q --upgrade pip
	$(SPARK40_PY) -m pip install -q -e '.[spark40]'
	touch $(SPARK40_STAMP)

$(COMPOSE_STAMP): Makefile
	[ -x $(COMPOSE_VENV)/bin/python ] || $(PYTHON) -m venv $(COMPOSE_VENV)
	$(COMPOSE_VENV)/bin/python -m pip install -q 'docker-compose>=1.29' 'PyYAML<5.4'
	touch $(COMPOSE_STAMP)

# The broker (its schema registry on 127.0.0.1:8081, metrics on 127.0.0.1:9404) and, once the
# broker listens (it loads its state first), the web console beside it on 127.0.0.1:8080 (it
# prints its address); Ctrl-C stops both.
run: install
	mkdir -p data
	@trap 'kill $$console $$broker 2>/dev/null; wait' EXIT; trap 'exit 130' INT TERM; \
	$(VENV)/bin/kbroker start --override listeners=PLAINTEXT://127.0.0.1:9092 --override log.dirs=data \
	  --override schema.registry.listeners=http://127.0.0.1:8081 --override metrics.port=9404 \
	  & broker=$$!; \
	while kill -0 $$broker 2>/dev/null && ! (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null; \
	  do sleep 0.5; done; \
	$(VENV)/bin/kbroker console --bootstrap-server 127.0.0.1:9092 --listen 127.0.0.1:8080 \
	  --metrics-url http://127.0.0.1:9404/metrics --schema-registry http://127.0.0.1:8081 \
	  & console=$$!; \
	wait $$broker

# Spark's own Kafka connector is tested on PySpark 4.0, in .venv-spark40 (see tests/spark).
# tests/ in one process, then compat_tests' kbroker, Kafka 3.9 and Kafka 4.3 columns side by
# side, one pytest process each (compat_tests/columns.py); both run, either may fail.
test: install
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -p no:cacheprovider tests; tests=$$?; \
	$(PY) -m compat_tests.columns -q -p no:cacheprovider; compat=$$?; \
	[ $$tests = 0 ] && [ $$compat = 0 ]
	$(SPARK40_PY) -m pytest -q -p no:cacheprovider tests/spark/test_stock_connector.py

bench: install
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/suite.py

# The container tests alone, with their figures: build docker/Dockerfile with podman (base
# images are local stand-ins), bring up both compose files, check them from outside.
docker-test: install
	$(PY) -m pytest -q -s -p no:cacheprovider tests/docker

# ZooKeeper (Debian's package) and three brokers on 127.0.0.1:9092-9094, data in cluster-data/;
# Ctrl-C stops them.
cluster: install
	$(PY) tests/cluster/local_cluster.py --dir cluster-data --base-port 9092

# Regenerate wire/messages from Kafka's JSON specs (../shared/kafka-protocol-4.3/message, with the
# versions Kafka 4 removed that kbroker keeps: wire/codegen/legacy.py).
generate: install
	$(PY) -m wire.codegen

clean:
	rm -rf $(VENV) $(SPARK40_VENV) $(COMPOSE_VENV) .pytest_cache .ruff_cache build *.egg-info

# The Spark page-view pipeline against a running broker ($KBROKER_BOOTSTRAP, default
# 127.0.0.1:9092, e.g. from `make run`); run it again to continue from its checkpoint in
# .spark-demo/. Spark's Kafka connector is not needed: it uses the kbroker data source.
spark-demo: install
	$(PY) -m spark_conn.demo --bootstrap "$${KBROKER_BOOTSTRAP:-127.0.0.1:9092}"

# Seeded fault schedules (partitions, pauses, kill -9, full disks) against ZooKeeper and three
# brokers in network namespaces, checked for lost, duplicated and vanished records (chaos/).
# One schedule at a time: SEED=first seed, RUNS=how many, DURATION=seconds each, ACKS=all|1,
# OVERLAP=N for mixes of 2..N faults active at once (default 1: one fault at a time).
chaos: install
	$(PY) -m chaos.run --seed $${SEED:-1} --runs $${RUNS:-5} --duration $${DURATION:-90} --acks $${ACKS:-all} --overlap $${OVERLAP:-1}
