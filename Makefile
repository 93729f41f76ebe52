.PHONY: run test lint check bench schemathesis serve

run:    ## web + worker on SQLite with demo data
	scripts/run.sh

test:   ## the whole suite on SQLite, then PostgreSQL
	scripts/test.sh

lint:   ## ruff, ruff format --check, mypy (settings in pyproject.toml), migrations check
	scripts/bootstrap.sh --dev && .venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy && .venv/bin/python manage.py makemigrations --check --dry-run

schemathesis:  ## fuzz the whole API against its OpenAPI schema, every check (slow; SQLite, then PostgreSQL if DATABASE_URL names it)
	scripts/bootstrap.sh --dev && env -u DATABASE_URL .venv/bin/python -m pytest -m slow -q -p no:cacheprovider tests/test_schemathesis.py
	@case "$${DATABASE_URL:-}" in postgres*) .venv/bin/python -m pytest -m slow -q -p no:cacheprovider tests/test_schemathesis.py;; esac

serve:  ## production: migrate, then uvicorn (ASGI) + queue_worker + queue_maintenance against DATABASE_URL
	scripts/serve.sh
