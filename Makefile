# PGXS build of the nl2sql extension, like every PostgreSQL extension's:
#
#   make install PG_CONFIG=/usr/lib/postgresql/17/bin/pg_config    (as root)
#   make installcheck PG_CONFIG=...   (against a running server: PGHOST, PGPORT, PGUSER)
#
# `make` builds extension/nl2sql--<version>.sql and the upgrade scripts from sql/
# (scripts/build_extension.py); `make install` copies them, the released install scripts and the
# control file into `pg_config --sharedir`/extension. The Python package the SQL functions import
# is not installed by make: pip-install this folder into the venv the server's PL/Python imports
# from (setting nl2sql.venv; docs/install.md, "Into a server you already run").
#
# `make installcheck` runs pg_regress on test/sql/*.sql against test/expected/*.out in a fresh
# database nl2sql_regression: settings, model configuration errors, retrieve on a tiny schema,
# refusals and doctor()'s shape (the deterministic surface; the rest is pytest's).
# Needs the server's development files (Debian: postgresql-server-dev-<major>) for PGXS.

PG_CONFIG ?= pg_config
PYTHON ?= python3

NL2SQL_VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' py_udf/nl2sql/__init__.py)
RELEASED := $(shell $(PYTHON) -c "import json; print(' '.join(json.load(open('extension/releases.json'))))")
MODULEDIR = extension
DATA = extension/nl2sql.control extension/nl2sql--$(NL2SQL_VERSION).sql \
       $(foreach v,$(RELEASED),extension/nl2sql--$(v).sql extension/nl2sql--$(v)--$(NL2SQL_VERSION).sql)

REGRESS = setup settings models retrieve refusals doctor
REGRESS_OUTDIR ?= test/out
REGRESS_OPTS = --inputdir=test --outputdir=$(REGRESS_OUTDIR) --dbname=nl2sql_regression
EXTRA_CLEAN = $(REGRESS_OUTDIR)

PGXS := $(shell $(PG_CONFIG) --pgxs)
ifeq ($(wildcard $(PGXS)),)
$(error $(PG_CONFIG) --pgxs names no PGXS file ($(PGXS)): install the server development files (Debian: postgresql-server-dev-<major>) or pass PG_CONFIG=/path/to/pg_config)
endif
include $(PGXS)

# the scripts are generated from sql/ (and the package's version) every time
all: extension-scripts
.PHONY: extension-scripts
extension-scripts:
	$(PYTHON) scripts/build_extension.py

installcheck: | $(REGRESS_OUTDIR)
$(REGRESS_OUTDIR):
	mkdir -p $@
