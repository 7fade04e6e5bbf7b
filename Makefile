# The two commands of the README: `make run` and `make test` (which also builds the wheel
# and runs it installed outside the checkout: tests/e2e/test_wheel_install.py).
# `make dist` writes the sdist and the wheel to dist/.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: run test quick screenshots lint bench dist clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

run: $(VENV)/.installed
	$(BIN)/fleetcron serve

# The suite runs in two parts at the same time (tests/conftest.py); the target fails if either
# does. The `serial` fault scenarios (tests/fault/) wait out real claim deadlines and leases in
# one pytest process of their own; their report is printed when both parts are done.
# Everything else runs beside them on $(TEST_WORKERS) pytest-xdist workers (tests sharing a
# module- or package-scoped fixture stay on one worker, and the workers get the largest of
# these groups first, the browser tests' among them, then the long single tests, the short
# unit tests last: tests/conftest.py orders them, --no-loadscope-reorder keeps that order)
# at a lower CPU priority (nice $(TEST_NICE)), so the scenarios' scheduler processes get the
# CPU as soon as they wake and their margins hold, while the rest of the suite uses the time
# they spend waiting. `.venv/bin/pytest` alone runs
# everything in one process. Each part prints its 20 slowest tests (`make test DURATIONS=0`: all).
# Honest by default (pyproject.toml, tests/conftest.py): a warning fails its test, and with
# CI (or STRICT_SKIPS) set a skip whose reason is not in ALLOWED_SKIPS fails the run.
#
# Latest (2026-12-07, sixth): the suite's temporary files live in memory
# (scripts/test-tmpdir.sh: a fresh 0755 directory under /dev/shm per run, about 1.9 GB at
# its peak, removed at the end; `FLEETCRON_TEST_TMP=disk` keeps the usual TMPDIR): the web
# tests alone 108-110 -> 95-98 s, their system CPU 26-29 -> 16 CPU-s; over a whole profiled
# run the machine's system CPU 247 -> 216 CPU-s. A new SQLite database is made from the
# head script instead of 42 migrations (store/sqlite_head.py; `fleetcron init` 1.60 -> 1.04
# CPU-s): the 202 CLI end-to-end tests 96 -> 77 CPU-s, 64 -> 54 s. `make test` 570, 568,
# 521 and 512 s (four green runs in a row; the parallel part the longer, 509-568 s, the
# serial part 447-462 s beside it). Under 8 minutes still needs the parallel part about
# 30-90 s shorter.
#
# Latest (2026-12-07, fifth): the browser tests drive Chromium's headless shell (Debian's
# chromium-headless-shell) instead of the desktop browser's headless mode (the 77 tests 55
# -> 35 CPU-s with the browser's, 96 -> 79 s alone); the replicated pair's two databases are
# copies of two templates made once per process, not migrated and seeded (at the product's
# password cost) for every pair (the 20 pair tests of integration/cluster and e2e 35 -> 15
# CPU-s of pytest and its children, 87 -> 62 s; PostgreSQL's share falls too); a cold
# `fleetcron cron` command no longer imports the database layer. A profiled whole run
# (procs, /proc/stat) with the headless shell, before the pair templates: the pytest
# processes 523 CPU-s, the PostgreSQL servers 163, the fault scenarios' nodes 131, the CLI
# commands forked from the zygote 47 (more than half of it `init` migrating a new database),
# Chromium 38, the scheduler processes of integration/scheduler about 35. Every process that
# starts local runs now waits for them through pidfds (executors/child_exit.py; the fault
# scenarios' nodes had the thread-per-process default). `make test` 564-636 s (six runs)
# after these on a host slower than the morning's (a 10-million-step Python loop 0.72-0.77
# s; the tree before took 566-633 s on a faster one): under 8 minutes still needs about 200
# CPU-s less.
#
# Latest (2026-12-07, fourth): the test processes settle their heap once the tests are
# collected, as a serving process does (fleetcron.heap.settle: the web tests spent 9% of
# their CPU in the collector, 3% after), the notification scenarios step their fake clock
# 30 s at a time instead of 10 (two rounds a minute; 81 -> 54 CPU-s for those 56 tests),
# the newest-run check after each test builds its statement once, and the product's
# security headers are pure ASGI middleware (a short API request 4.2-4.6 -> 3.9 CPU-ms).
# The machine's busy CPU over a whole run (/proc/stat, same host and tree otherwise):
# 1,198 -> 1,136 CPU-s; `make test` 622 -> 566 s (the parallel part 565 s, the serial part
# 457 s beside it, now close to being the longer one). Under 8 minutes needs about 200
# CPU-s less again, and the serial part's waits shorter.
#
# Latest (2026-12-07, third): the integration tests' engines take their PostgreSQL
# connections from those the previous test's engine gave back (tests/fixtures/
# warm_connections.py: no new server process and catalog caches per test; 1,108 PostgreSQL
# integration tests 415 -> 377 CPU-s of the machine), the web tests read their CSRF token
# from the account page, not the dashboard (84 -> 76 CPU-s over 16 modules), and the
# product's run writes on PostgreSQL are statements that do not grow with the batch. A whole
# `make test` on a quiet host (a pure-Python loop 0.69-0.72 s, as below): 589 s, the
# parallel part 587 s, the serial part 446 s beside it. Still over 8 minutes: the suite
# needs about 1,150 CPU-s of two cores.
#
# Latest (2026-12-07, later): a reusable PostgreSQL database's reset now rewrites only the
# tables the test changed (tests/fixtures/pg_reuse.py): the 557 PostgreSQL tests of
# integration/web and integration/store took 116 -> 96 s on two workers, their server CPU
# 72 -> 55 s and pytest's 118 -> 110 s. A whole `make test` on a slower host (a
# pure-Python loop 0.72 s) took 789 s: the parallel part 786 s, the serial part 483 s
# beside it (49 scenarios, two more than before).
# Where the time goes now (2 cores, measured 2026-12-07 with a per-test CPU plugin and
# /proc/stat on a host faster than the evening before's: a pure-Python loop 0.52 s against
# 0.70-0.82). `make test` 644-649 s: the parallel part 641-646 s (727-770 CPU-s in pytest
# and the processes it waits for), the serial part 423-447 s beside it (177-183 CPU-s),
# the PostgreSQL servers 190-210 CPU-s more; the cores are busy 90-99% of the time. By
# directory, CPU-s: integration/web 178, integration/notify 89, the CLI commands of
# tests/e2e about 90 (through the zygote), the browser 56 with Chromium's, integration/
# cluster 48, integration/store 40, integration/scheduler 37, the fault scenarios' nodes
# about 120. Under 8 minutes needs about a quarter less CPU again. The cuts of that day:
# the fault scenarios' nodes fork from one server per worker that imported fleetcron once
# (the scenarios 334 -> 177 CPU-s, 509 -> 406 s alone), the groups below take effect again
# (pytest-xdist had been spreading every group over all the workers: four Chromiums and
# four live servers; the browser tests' wall time 473 -> 162 s), and the serial part
# collects only tests/fault. Before that, on the slower host of the evening before:
# Where the time went (2 cores, a slower host than the figures further down, measured
# 2026-12-06 evening with a per-test CPU plugin and /proc/stat; the history follows).
# `make test` 775-846 s: the parallel part 773-843 s (845-914 CPU-s in pytest and the
# processes it waits for), the serial part 497-525 s beside it (309-348 CPU-s), the
# PostgreSQL servers 225-323 CPU-s more; the two cores are busy 99% of the time while
# both parts run and 80-90% in the parallel part's last 270 s. By directory, CPU-s of the
# pytest processes: integration/web 167 (1,086 tests), integration/notify 90, the browser
# 94 with Chromium's, integration/cluster 47, integration/store 41, integration/scheduler
# 37, the CLI commands of tests/e2e about 120 (through the zygote), the fault scenarios'
# nodes about 250. Under 8 minutes needs about 40% less CPU again, not less waiting.
# That evening's cuts, each measured before/after on the same files: the integration
# tests' engines share one process-wide compiled-statement cache (a fifth of a web test's
# CPU was compiling the same statements again for each new engine), the web templates
# carry the cheap password hashes, the incident scenarios tell each negative control from
# the same drive, the fault scenarios' process watch rereads only processes that can be
# in a watched group, and `make quick` runs on two workers (74 -> 34-49 s).
# Where the time goes (2 cores, 2026-12-06). Before the changes of that day the parallel
# part took 834 s for 3,765 tests on 3 workers and was the critical path (its slowest: the
# dashboard grid at 500 jobs 40 s, the local gate's sequences 32 s, schemathesis 31 s, each
# incident scenario 9-17 s, the wheel 15 s); the serial part 309 s for its 36 scenarios two
# at a time, nearly all of it waiting out real leases and claim deadlines (the longest: the
# issue reproduction 40 s, a paused old owner 31 s, 500 assignments on two nodes 19 s). The
# whole of `make test` used 19 CPU-minutes in 14 minutes of two cores, so the cores were
# idle a third of the time: when all three workers waited at once (on a command, a timeout,
# PostgreSQL, Chromium), and at the end, where one worker ran the browser tests alone (one
# group of 71 tests sharing a server and Chromium, 125-137 CPU-s with Chromium's, was
# handed out last).
# Now four workers, the largest groups first and the long single tests next. Measured with
# `nice -n 15` on a machine other sessions loaded to a load average of 4-17 (so its wall
# time, 1,512 s, is not an idle machine's): the parallel part, 3,765 tests, took 1,246 CPU-s
# (user+sys of pytest and the processes it waits for; the PostgreSQL servers' not counted)
# and its four workers ended within 3 s of each other. At that CPU two cores need 10.4
# minutes for this part alone: under 8 needs less CPU, not only less waiting. By directory
# (CPU-s): integration/web 353 (939 tests), integration/notify 188 (144), e2e without the
# browser 150 (194), the browser 124 (72), integration/scheduler 69, integration/store 62,
# integration/cluster 50, unit 50 (1,361), the rest 128. Its slowest then: the dashboard
# grid at 500 jobs, schemathesis, the local gate's sequences and the incident scenarios.
# `make quick` skips both parts (45 s idle).
# Where the CPU goes (measured 2026-12-06 as CPU seconds, user+sys, since the machine was
# loaded): tests/integration/web, 895 tests, 292 CPU-s in the pytest processes plus the
# PostgreSQL server's; a PostgreSQL test's setup took 0.8 s against SQLite's 0.2 s, most of
# it CREATE DATABASE from the template (now by file copy: 0.02 CPU-s in the server, it was
# 0.07-0.19 block by block through the WAL). A cold `fleetcron` start costs 1.2 CPU-s (now
# kept for tests/e2e and the scheduler processes; in-process elsewhere), a pytest worker's
# collection 10 CPU-s without cached bytecode and 5 with it, a product-cost argon2 hash
# 0.2 CPU-s (the template's seed only; the web tests rehash with the cheapest cost), the
# zone detection of each local target added 8 ms. tests/integration without web, 970
# tests: 370 CPU-s, a third of it (128) the incident scenarios, half of theirs in
# evaluate_alerts re-reading every failed run of its window at each 10 s round (the
# product's own cost, multiplied by 190 rounds). tests/integration/notify, 166 tests with
# `-n 0`: 123 CPU-s of pytest's (load 2; the PostgreSQL server's not counted), 54 of them
# the incident scenarios, whose rounds now load no judged run, read the rules once and an
# incident's targets as plain rows (a quiet round 25 % less CPU, docs/benchmarks.md; the
# scenarios 58-67 CPU-s before and 54-63 after, run alternately at load 10-23, within the
# shared machine's noise). What remains is the tests' own work:
# requests through the ASGI app, real commands, the long generated searches (schemathesis,
# the local gate's sequences, 5,000 targets' upcoming fires), and Chromium. tests/e2e
# without the browser, 194 tests: 192 CPU-s, now 143 (the password and secret commands run
# through the zygote instead of a cold start each; the zone, job history and upcoming tests
# copy a fleet set up once per worker instead of running `init` and the setup each time).
# tests/integration/web, measured per test (setup to teardown, user+sys of pytest and its
# children, `-n 0 -p no:cacheprovider`, the PostgreSQL server's not counted, a loaded machine):
# 375 CPU-s for 991 tests (SQLite 248, PostgreSQL 127), now 268 (SQLite 180, PostgreSQL 88).
# A new application resolved FastAPI's routes on their first match, 0.06-0.1 CPU-s in every
# test with a client: the tests' applications now share the first one's route table
# (`web_app`, tests/integration/web/conftest.py). The job fleet's three minutes of real runs
# are recorded once per module and database and each test takes a copy (`sqlite_source`,
# `postgres_source` in tests/fixtures/app.py). Left per test: the app about 0.02 CPU-s, a
# client 0.01, a log-in and the dashboard 0.06 (SQLAlchemy compiles each statement again
# for every new engine). Slowest: schemathesis 34 CPU-s, two thirds of it generating
# (4,966 draws for 1,398 requests; seven negative-mode operations with nothing to get wrong
# spend 6 s finding it out), 7.5 in the application; the local gate's sequences 23, of which
# the application's 11 (1,576 requests of about 7 ms), restoring and checking 3; the
# upcoming walk of 5,000 targets 5 (PostgreSQL) and 3 (SQLite).
# On a quiet machine after that day's merges (3,903 tests in the parallel part, 139 of them
# new: OIDC, LDAP, the trust page): `make test` 15 min 24 s and 14 min 44 s with four
# workers (the parallel part 922 s and 882 s), 14 min 40 s with three (874 s); the serial
# part 347-355 s beside it. Four and three are alike within the noise.
# Four workers on two cores: a worker often waits (on a command, a timeout, PostgreSQL, a
# browser), and a fourth fills the cores meanwhile; each worker costs about 10 CPU-s of its
# own (collection, its PostgreSQL cluster, its CLI zygote).
# tests/e2e measured again the same day, each part beside the previous tests at the same
# time (load average 15-25, so both inflated; CPU of pytest and everything under it,
# Chromium and PostgreSQL included): outside the browser 122 -> 116 CPU-s, the browser 144
# -> 135. What is left is mostly the product's own work and Chromium's per action (a new
# context about 0.5 CPU-s, a page load about 0.1); on a loaded machine the same tests cost
# 20-40% more CPU than on a quieter one (104 and 120 earlier that morning). The browser
# tests are one group of 120-135 CPU-s: handed out first, it ends long before the suite
# does, so two groups would only add a second server, Chromium and log-ins (about 5 CPU-s).
# The PostgreSQL server's own CPU is not in these figures: CREATE DATABASE from the
# template and DROP DATABASE cost it about 120 ms per PostgreSQL test (read from the
# postmaster's /proc; 330 ms of the test's waiting), for 833 tests. Now each pytest
# process keeps one database per source and puts its rows, sequences, schema and the
# planner's view of them back before each test (tests/fixtures/pg_reuse.py: one TRUNCATE,
# a binary COPY, the statistics removed): about 35 ms of the server's CPU and of waiting. The PostgreSQL tests of integration/store and two web modules (210 tests, one
# process, a loaded machine): 216 s -> 108 s.
# After the day's second round of merges, on a quiet machine: `make test` 13 min 54 s, the
# parallel part 832 s for 4,001 tests (98 more: projects, shards, the claim check, the
# group watchdog), the serial part 341 s beside it.
# The web tests' largest consumers, each file alone (`-n 0`, user+sys of pytest and its
# children, loaded machine), 2026-12-06 afternoon: schemathesis 34 -> 27 CPU-s (fuzzing
# 26.8 -> 17.3: 26 operations with nothing a request could get wrong fuzz in positive mode
# only, the application's share 11 -> 7.7), the local gate's sequences 25 -> 18 (a tree of
# common prefixes: 900 requests, not 1,576), the upcoming walk over 5,000 targets 14 -> 12
# (one bulk INSERT); in the product a token's or session's check 1.2 -> 0.4 ms of CPU and
# one thread switch less per API request (bench/auth_bench.py). `make quick` 68 -> 52 CPU-s.
TEST_WORKERS ?= 4
# The fault scenarios mostly wait out real leases and deadlines: two at a time.
SERIAL_WORKERS ?= 2
# How many of the slowest tests each part reports (0: all of them).
DURATIONS ?= 20
TEST_NICE ?= 10

# Bytecode is cached even where the environment says not to (PYTHONDONTWRITEBYTECODE set):
# otherwise every pytest worker rewrites and compiles each test module again (about 5 s of
# CPU per worker) and every process the suite starts (the CLI zygote, schedulers, the fault
# scenarios' nodes) compiles fleetcron from source (about 0.3 s each).
test quick: export PYTHONDONTWRITEBYTECODE :=

# The serial part collects only the directories marked serial (SERIAL_DIRECTORIES in
# tests/conftest.py): its two workers skip collecting the other 4,200 tests (3.5 CPU-s each).
SERIAL_TESTS := tests/fault

test: $(VENV)/.installed
	bash scripts/system-deps.sh
	@. scripts/test-tmpdir.sh; \
	serial_log=$$(mktemp); \
	echo "the fault scenarios (marked serial) run beside the rest; their report comes last"; \
	$(BIN)/pytest -m serial -n $(SERIAL_WORKERS) --dist loadgroup --durations=$(DURATIONS) $(SERIAL_TESTS) > $$serial_log 2>&1 & serial_pid=$$!; \
	nice -n $(TEST_NICE) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder -m "not serial" --durations=$(DURATIONS); \
	parallel=$$?; \
	wait $$serial_pid; serial=$$?; \
	cat $$serial_log; rm -f $$serial_log; \
	test $$parallel -eq 0 && test $$serial -eq 0

# The edit loop, under a minute on two cores: unit tests, the contract tests of the
# executors and the API, and a smoke test of the CLI and of the API, on SQLite. `--quick`
# (tests/conftest.py) leaves out whatever needs PostgreSQL, sshd, a browser or real deadlines.
QUICK_TESTS := tests/unit tests/integration/executors/test_executor_contract.py \
	tests/integration/web/test_schemathesis.py tests/integration/web/test_smoke_api.py \
	tests/e2e/test_smoke_cli.py

# Two workers (the API's fuzzing, a third of the CPU, comes in parts handed out first).
quick: $(VENV)/.installed
	@. scripts/test-tmpdir.sh; \
	$(BIN)/pytest --quick -q -n 2 --dist loadgroup --no-loadscope-reorder $(QUICK_TESTS)

# The browser tests with whole-page screenshots under test-artifacts/screenshots/ (the suite
# keeps only what each page's viewport shows: a whole page costs Chromium ten times more).
screenshots: $(VENV)/.installed
	TEST_SCREENSHOTS=full $(BIN)/pytest -q -n 0 tests/e2e/browser

# The complexity rules (C901, PLR0912, PLR0913, PLR0915, PLR0917) run in
# scripts/complexity_baseline.py, against lint-baseline.json, which may only shrink.
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/python scripts/complexity_baseline.py
	$(BIN)/mypy src/fleetcron
	$(BIN)/mypy tests bench scripts --exclude '^tests/(integration/executors|e2e/browser|fault)/'
	$(BIN)/mypy tests/fault
	MYPYPATH=tests/integration/executors $(BIN)/mypy tests/integration/executors
	MYPYPATH=tests/e2e/browser $(BIN)/mypy tests/e2e/browser


dist: $(VENV)/.installed
	rm -rf dist build
	$(BIN)/python -c "from setuptools import build_meta as b; b.build_sdist('dist')"
	$(BIN)/pip wheel --no-deps --no-build-isolation -q -w dist .

bench: $(VENV)/.installed
	$(BIN)/python bench/cron_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build dist
