.PHONY: run test lint check bench

run:    ## web + worker on SQLite with demo data
	scripts/run.sh

test:   ## the whole suite on SQLite, then PostgreSQL
	scripts/test.sh

lint:
	scripts/bootstrap.sh && .venv/bin/ruff check . && .venv/bin/python manage.py makemigrations --check --dry-run
