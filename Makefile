# WoTbench front door. The two commands a newcomer needs:
#   make run CONFIG=configs/20dev.yaml    run a whole test, leave an HTML report under reports/
#   make test                             build everything and run the test suite
SHELL := /bin/bash
CONFIG ?= configs/20dev.yaml
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: all bootstrap build build-asan run test test-long fuzz test-bench-smoke test-scale check bench bench-scale bench-fleet bench-fleet-fidelity bench-fleet-cluster bench-fleet-rd bench-connected bench-connected-ws bench-faults bench-notify study study-quick clean docker-clean help \
	cluster-up cluster-down cluster-status cluster-images test-cluster

all: build

help:
	@echo "make run CONFIG=configs/20dev.yaml   run a test and write reports/<name>-<time>/report.html"
	@echo "                                     (prints the verdict and wotbench's exit code; make itself exits 2 on any failure)"
	@echo "make test                            build and run the tests: tests/unit (2 in parallel), tests/c, tests/e2e, tests/bench (< 10 min)"
	@echo "make test-long                       the long end-to-end tests (marked long: sweeps with repeats, capacity search, faults; CI runs them too)"
	@echo "make test-bench-smoke                every benchmark's smoke run alone (tests/bench; part of make test)"
	@echo "make test-scale                      the 200-device e2e run (kept out of make test)"
	@echo "make fuzz                            every C parser's libFuzzer target (GE trace, HTTP response; device request, fleet datagram, resource file), FUZZ_SECONDS=300 each"
	@echo "make check                           the fast loop: tests/unit (no binaries, no Docker), in parallel, < 60 s"
	@echo "make bench                           measure the emulators and print the figures (GE, devices, DTLS, Observe, block-wise, closed loop, HTTP vs wrk/wrk2, device push)"
	@echo "make bench-scale                     scale-200 at 100/300/1000/1100 devices: start rate, testbed loss, teardown (SIZES=... PER_CONTAINER=auto|N)"
	@echo "make bench-fleet                     configs/fleet-100k.yaml on Docker: warm-up, ready time, testbed loss, GE kept up, teardown, memory per device (FLEET_ARGS=\"--set duration_s=30\")"
	@echo "make bench-fleet-fidelity            process form vs wot-fleet engine: 100/1000 devices, sleep/busy, interleaved repeats (FIDELITY_ARGS=\"--repeats 3\")"
	@echo "make bench-fleet-cluster             (root) wot-fleet engines on an emulated Swarm of its own, growing fleets toward 10^6 (CLUSTER_ARGS=\"--nodes 4 --sizes 100000,1000000\")"
	@echo "make bench-fleet-rd                  configs/fleet-rd.yaml: 100 000 engine devices register with aiocoap-rd and push readings: RD rate, send lag, who gave up (FLEET_RD_ARGS=...)"
	@echo "make bench-connected                 connected devices against nginx+nchan: 100 000 WebSocket devices attached and held, memory per device, RPC round trip from 2 000 applications (CONNECTED_ARGS=\"--hold-s 60\")"
	@echo "make bench-connected-ws              applications each on its own WebSocket through webdis (Debian 13's, scripts/webdis-debian13.sh): RPC round trip at 1 000/s from 2 000 applications, the testbed's share (CONNECTED_WS_ARGS=\"--duration-s 60\")"
	@echo "make bench-notify                    update -> notification latency through nginx+nchan: per subscriber kind, lost notifications (NOTIFY_ARGS=...)"
	@echo "make bench-faults                    kill devices, a pod device, a GE, the harness; fill the disk; edit the config (FAULT_ARGS=...)"
	@echo "make study                           run the contention-detector validation study, write reports/study-*/table.md"
	@echo "make study-quick                     a smoke check of the study: one run each of five scenarios (~6 min)"
	@echo "make build                           install prerequisites, build the C binaries"
	@echo "make docker-clean                    remove anything a killed run left behind"
	@echo "make clean                           remove build outputs"
	@echo "make cluster-up N=3                  (root) an emulated Docker Swarm of N nodes on this host, WoTbench's images on each (docs/CLUSTER.md)"
	@echo "make cluster-status                  the emulated cluster, per node"
	@echo "make cluster-images                  carry the images (the cell agent: the code) to every node again"
	@echo "make cluster-down                    remove everything cluster-up created (idempotent)"
	@echo "make test-cluster                    (root) the emulated cluster: forms, pinned devices, overlay; backend: swarm 3 cells x 300 devices, a node killed, clean, a swarm sweep naming the node whose pod was killed; down leaves nothing (~6.5 min)"

bootstrap:
	@bash scripts/bootstrap.sh

build: bootstrap
	@$(MAKE) --no-print-directory -C gateway-emulator
	@$(MAKE) --no-print-directory -C wot-device
	@$(MAKE) --no-print-directory -C rpc-app
	@$(MAKE) --no-print-directory -C warden

build-asan: bootstrap
	@$(MAKE) --no-print-directory -C gateway-emulator asan
	@$(MAKE) --no-print-directory -C wot-device asan
	@$(MAKE) --no-print-directory -C rpc-app asan

# harness.sh bootstraps and builds itself (it is also the entry point without make). make turns
# every failing recipe into its own exit code 2, so the verdict code is printed here; scripts
# that need it call ./harness.sh or .venv/bin/wotbench run directly.
run:
	@./harness.sh "$(CONFIG)"; rc=$$?; \
	case $$rc in 0) what="trustworthy";; 3) what="flagged: the testbed distorted the result (see the verdict above)";; \
	  4) what="trustworthy, but an SLO missed: the system under test, not the testbed";; \
	  2) what="bad input";; 1) what="environment problem";; 130|143) what="interrupted";; *) what="see above";; esac; \
	echo "make run: wotbench run exited with $$rc ($$what)"; exit $$rc

# the unit tests two at a time (as make check), then the C, end-to-end and benchmark smoke tests
# one at a time (they measure time); the tests marked long are make test-long's (CI runs both)
test: build build-asan
	@bash scripts/run-tests.sh --suite $(PYTEST_ARGS)

# the long end-to-end tests (minutes of real runs: sweeps with repeats, the capacity search,
# faults during runs), kept out of make test to hold it under 10 minutes; .ci/run runs them too
test-long: build build-asan
	@bash scripts/run-tests.sh -m "long and not scale" $(PYTEST_ARGS)

# every benchmark's --smoke run (part of make test): proves each bench still runs to the end
test-bench-smoke: build
	@bash scripts/run-tests.sh tests/bench $(PYTEST_ARGS)

# the 200-device e2e run (about a minute), kept out of `make test` to hold it near 10 minutes
test-scale: build
	@bash scripts/run-tests.sh tests/e2e -m scale $(PYTEST_ARGS)

# the fast loop: no C build, no Docker; the benchmark-style tests marked slow run in make test.
# Python keeps its byte-code cache here even where PYTHONDONTWRITEBYTECODE is set (this host's
# sessions set it): without it each of the two workers compiles and assertion-rewrites every
# module anew, ~5 s of CPU each before the first test (docs/USAGE.md)
check: bootstrap
	@PYTHONDONTWRITEBYTECODE= bash scripts/run-tests.sh tests/unit -n 2 -m "not slow" -q $(PYTEST_ARGS)

# the C parsers' libFuzzer targets, one at a time, FUZZ_SECONDS each (make test: a few seconds)
FUZZ_SECONDS ?= 300
fuzz: bootstrap
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh

bench: build
	@$(PY) bench/run_all.py

# the scale benchmark (issue 10): tens of minutes at 1000 devices on a small host
SIZES ?= 100,300,1000,1100
PER_CONTAINER ?= auto
bench-scale: build
	@$(PY) bench/scale_bench.py --sizes $(SIZES) --per-container $(PER_CONTAINER)

# 100 000 devices in wot-fleet engines (issue 29): prints the issue's figures, holds the host lock
FLEET_ARGS ?=
bench-fleet: build
	@$(PY) bench/fleet_bench.py $(FLEET_ARGS)

# process form vs wot-fleet engine, same workload, interleaved repeats (issue 29; docs/FLEET.md)
FIDELITY_ARGS ?=
bench-fleet-fidelity: build
	@$(PY) bench/fleet_fidelity_bench.py $(FIDELITY_ARGS)

# wot-fleet engines on an emulated Swarm of its own (root; issue 29 part 4, docs/FLEET.md)
CLUSTER_ARGS ?=
bench-fleet-cluster: build
	@$(PY) bench/fleet_cluster_bench.py $(CLUSTER_ARGS)

# 100 000 engine devices register with aiocoap-rd and push readings (issue 29): the rate the RD
# sustained, the devices' send lag, who gave up first; holds the host lock
FLEET_RD_ARGS ?=
bench-fleet-rd: build
	@$(PY) bench/fleet_rd_bench.py $(FLEET_RD_ARGS)

# connected devices (issue 30, docs/CONNECTED.md): attach and hold, memory, RPC round trip
CONNECTED_ARGS ?=
bench-connected: build
	@$(PY) bench/connected_bench.py $(CONNECTED_ARGS)

# applications each on its own WebSocket through webdis (Debian 13's): 1 000 RPC/s from 2 000
CONNECTED_WS_ARGS ?=
bench-connected-ws: build
	@$(PY) bench/connected_wsapps_bench.py $(CONNECTED_WS_ARGS)

# update -> notification latency through nginx's nchan (issue 35, docs/PLATFORMS.md)
bench-notify: build
	@$(PY) bench/notify_bench.py $(NOTIFY_ARGS)

# faults during runs (issue 20): one row per fault. FAULT_ARGS="--scale 1000 --repeats 5" adds
# killed 1000-device runs and the time `clean` takes; "--restart-daemon" restarts dockerd (opt-in)
FAULT_ARGS ?=
bench-faults: build
	@$(PY) bench/faults_bench.py $(FAULT_ARGS)

# the contention-detector validation study (cd-module/validation/scenarios.yaml), in process and
# resumable; waits for a quiet host before each run. STUDY_ARGS="--only V-cpu-hog" etc.
study: build
	@$(VENV)/bin/wotbench study $(STUDY_ARGS)

# one repeat of a subset: an antagonist of each kind, an injected hog and a clean run
QUICK_SCENARIOS ?= V-host-loop-device V-container-hog V-second-run V-cpu-hog V-clean-light
study-quick: build
	@$(VENV)/bin/wotbench study --repeats 1 --only $(QUICK_SCENARIOS) $(STUDY_ARGS)

clean:
	@$(MAKE) --no-print-directory -C gateway-emulator clean
	@$(MAKE) --no-print-directory -C wot-device clean
	@$(MAKE) --no-print-directory -C rpc-app clean
	@$(MAKE) --no-print-directory -C warden clean

docker-clean: bootstrap
	@$(VENV)/bin/wotbench clean

# -- an emulated Docker Swarm on this host (issue 24, docs/CLUSTER.md); needs root --------------
N ?= 3
BLOCK ?= 10.213.0.0/16
cluster-up: build
	@$(PY) scripts/cluster/cluster.py up --nodes $(N) --block $(BLOCK)

cluster-down: bootstrap
	@$(PY) scripts/cluster/cluster.py down

cluster-status: bootstrap
	@$(PY) scripts/cluster/cluster.py status

cluster-images: build
	@$(PY) scripts/cluster/cluster.py images

# the emulated cluster's own checks (root, a few minutes): up, pinned devices, a global
# service over an overlay, down leaves nothing
test-cluster: build
	@WOTBENCH_TEST_CLUSTER=1 bash scripts/run-tests.sh tests/cluster -v $(PYTEST_ARGS)
