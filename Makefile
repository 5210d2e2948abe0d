# WoTbench front door. The two commands a newcomer needs:
#   make run CONFIG=configs/20dev.yaml    run a whole test, leave an HTML report under reports/
#   make test                             build everything and run the test suite
SHELL := /bin/bash
CONFIG ?= configs/20dev.yaml
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: all bootstrap build build-asan run test bench validate clean docker-clean help

all: build

help:
	@echo "make run CONFIG=configs/20dev.yaml   run a test and write reports/<name>-<time>/report.html"
	@echo "make test                            build and run the tests"
	@echo "make bench                           measure the emulators and print the figures"
	@echo "make validate                        run the validation scenarios, write reports/validate-*/table.md"
	@echo "make build                           install prerequisites, build the C binaries"
	@echo "make docker-clean                    remove anything a killed run left behind"
	@echo "make clean                           remove build outputs"

bootstrap:
	@bash scripts/bootstrap.sh

build: bootstrap
	@$(MAKE) --no-print-directory -C gateway-emulator
	@$(MAKE) --no-print-directory -C wot-device

build-asan: bootstrap
	@$(MAKE) --no-print-directory -C gateway-emulator asan
	@$(MAKE) --no-print-directory -C wot-device asan

run:   # harness.sh bootstraps and builds itself (it is also the entry point without make)
	@./harness.sh "$(CONFIG)"

test: build build-asan
	@bash scripts/run-tests.sh $(PYTEST_ARGS)

bench: build
	@$(PY) bench/run_all.py

# validation scenarios (configs/validation/scenarios.yaml); waits for a quiet host before each run
validate: build
	@$(PY) -m wotbench.validate $(VALIDATE_ARGS)

clean:
	@$(MAKE) --no-print-directory -C gateway-emulator clean
	@$(MAKE) --no-print-directory -C wot-device clean

docker-clean: bootstrap
	@$(VENV)/bin/wotbench clean
