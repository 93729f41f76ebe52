"""Django settings, read from the environment with django-environ.

Environment: DATABASE_URL (default: SQLite file ``db.sqlite3`` beside manage.py),
SECRET_KEY (a development default, refused when DEBUG is off), DEBUG, ALLOWED_HOSTS.
Product settings with their types and defaults live in ``queueproject.conf``.
"""

import sys
from pathlib import Path
from typing import Any

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
# Zero set-up (no DATABASE_URL: the SQLite file) is development, DEBUG on by
# default; with a DATABASE_URL the default is off and SECRET_KEY is required.
DEBUG = env.bool("DEBUG", default="DATABASE_URL" not in env)
SECRET_KEY = env.str("SECRET_KEY", default=DEV_SECRET_KEY)
if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured(
        "SECRET_KEY must be set when DEBUG is off (the development default is refused)."
    )
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc as static files (no CDN)
    "queueproject",
    "principals",
    "groupqueues",
    "sessionqueues",
    "store",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files (admin, API docs) also with DEBUG off, from the one process.
    "queueproject.static_files.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "queueproject.urls"
# The apps' API URLconfs, mounted under /api/ in this order by queueproject/urls.py
# (named here so that the shared layer names no app).
API_URLCONFS = ["principals.urls", "groupqueues.urls", "sessionqueues.urls", "store.urls"]
# A refused CSRF check under /api/ answers the error envelope, not Django's page.
CSRF_FAILURE_VIEW = "queueproject.exceptions.csrf_failure"
WSGI_APPLICATION = "queueproject.wsgi.application"
ASGI_APPLICATION = "queueproject.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Databases -------------------------------------------------------------


def web_process() -> bool:
    """Whether this process serves HTTP: ``manage.py runserver``, or a server
    that loads ``queueproject.asgi`` / ``queueproject.wsgi`` (uvicorn,
    gunicorn), which read these settings while that module is being imported.
    ``QUEUE_WEB_PROCESS`` (on/off) overrides the guess."""
    if "QUEUE_WEB_PROCESS" in env:
        return bool(env.bool("QUEUE_WEB_PROCESS"))
    entry_points = {"queueproject.asgi", "queueproject.wsgi"}
    return sys.argv[1:2] == ["runserver"] or not entry_points.isdisjoint(sys.modules)


# DATABASE_URL names a pooler in transaction mode (PgBouncer
# pool_mode=transaction): a connection's session is not ours between
# transactions, so nothing may rely on it (no LISTEN, no prepared statements
# by default, no session SET, no server-side cursor kept open). See
# docs/production.md, "Behind PgBouncer".
DATABASE_TRANSACTION_POOLER = env.bool("DATABASE_TRANSACTION_POOLER", default=False)
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
_db = DATABASES["default"]
if _db["ENGINE"] == "django.db.backends.sqlite3":
    # Web and worker processes share one file: WAL lets readers run beside the
    # writer, the busy timeout makes a writer wait instead of failing, and
    # IMMEDIATE takes the write lock at BEGIN so two processes never both read
    # a row as claimable inside their transactions.
    _db.setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": env.float("SQLITE_BUSY_TIMEOUT", default=30.0),
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
    # A file (not :memory:) so that worker subprocesses in tests share it.
    _db.setdefault("TEST", {})["NAME"] = str(BASE_DIR / ".test-db.sqlite3")
elif _db["ENGINE"] in ("django.db.backends.postgresql", "django.db.backends.postgresql_psycopg2"):
    _db["ENGINE"] = "django.db.backends.postgresql"
    _db["CONN_HEALTH_CHECKS"] = True
    if DATABASE_TRANSACTION_POOLER:
        # A WITH HOLD cursor (Django's .iterator() outside a transaction)
        # outlives its transaction, and so its server connection's turn.
        _db["DISABLE_SERVER_SIDE_CURSORS"] = True
    # The web process's connections (issue 21). Its request threads come and
    # go (runserver: one per client connection; uvicorn: one per request, from
    # asgiref's ThreadSensitiveContext), so a connection kept per thread
    # (CONN_MAX_AGE) outlives its thread until the garbage collector finds it,
    # and they pile up until PostgreSQL refuses everyone. A web process
    # borrows from one psycopg pool per process instead: at most
    # DB_POOL_MAX_SIZE connections, a request waits up to DB_POOL_TIMEOUT
    # seconds for one, then answers 503 `unavailable` (queueproject/exceptions.py).
    # Workers and other commands keep one persistent connection per long-lived
    # thread (CONN_MAX_AGE), bounded by their thread counts.
    DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", default=10)
    DB_POOL_TIMEOUT = env.float("DB_POOL_TIMEOUT", default=10.0)
    if not web_process():
        _db["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=600)
    elif DB_POOL_MAX_SIZE > 0:
        _db["CONN_MAX_AGE"] = 0  # the pool keeps them (Django refuses both)
        _db.setdefault("OPTIONS", {})["pool"] = {
            "min_size": min(2, DB_POOL_MAX_SIZE),
            "max_size": DB_POOL_MAX_SIZE,
            "timeout": DB_POOL_TIMEOUT,
            "name": "web",
        }
    else:  # no pool: a connection per request, closed at its end
        _db["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=0)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Covering indexes (INCLUDE) serve PostgreSQL; SQLite ignores the extra columns.
SILENCED_SYSTEM_CHECKS = ["models.W040"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# WhiteNoise serves STATIC_ROOT (``collectstatic``, as the Dockerfile runs) and,
# without it, the apps' static folders through the finders, so a checkout
# started with DEBUG off (the black-box tests, `make serve`) serves them too.
WHITENOISE_USE_FINDERS = env.bool("WHITENOISE_USE_FINDERS", default=True)

# Request bodies: Django's own cap (forms, admin) and the API's JSON parser cap.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("API_MAX_BODY_BYTES", default=2 * 1024 * 1024)

# --- REST framework: fail closed ---------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "principals.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["queueproject.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "queueproject.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "queueproject.exceptions.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["principals.throttling.PrincipalRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "principal": env.str("API_THROTTLE_RATE", default="6000/min"),
    },
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Durable queues for Django",
    "DESCRIPTION": "Group queues and session queues over REST. Authenticate with "
    "`Authorization: Bearer <token>` (see `manage.py create_token`).",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    "SECURITY": [{"bearerAuth": []}],
    "APPEND_COMPONENTS": {"securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}}},
    "GET_LIB_DOC_EXCLUDES": "queueproject.schema.lib_doc_excludes",
    "PATH_CONVERTER_OVERRIDES": {"api_id": {"type": "string", "format": "uuid"}},
    # Swagger UI and Redoc from drf-spectacular-sidecar's pinned copies (works offline).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
# One schema name for the dead reasons (a message's dead_reason and the
# dead-message filter's reason list use the same choices).
SPECTACULAR_SETTINGS.setdefault("ENUM_NAME_OVERRIDES", {})
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]["DeadReasonEnum"] = "groupqueues.models.DeadReason"  # type: ignore[index]

CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
}

# Product settings (types and defaults in queueproject/conf.py).
SESSIONQUEUES_MAX_PER_SESSION = env.int("SESSIONQUEUES_MAX_PER_SESSION", default=10)
# Off by default behind a transaction pooler: PgBouncer keeps prepared
# statements only from 1.21 on (max_prepared_statements).
QUEUE_PREPARED_STATEMENTS = env.bool(
    "QUEUE_PREPARED_STATEMENTS", default=not DATABASE_TRANSACTION_POOLER
)
# Asynchronous commit for group-queue claims (trade-off in queueproject/conf.py).
QUEUE_ASYNC_COMMIT_CLAIMS = env.bool("QUEUE_ASYNC_COMMIT_CLAIMS", default=False)

# Group queue workers (SPEC §2). QUEUE_LISTEN_NOTIFY=0 for poolers that break
# LISTEN (PgBouncer in transaction mode): workers then poll.
QUEUE_LISTEN_NOTIFY = env.bool("QUEUE_LISTEN_NOTIFY", default=not DATABASE_TRANSACTION_POOLER)
if DATABASE_TRANSACTION_POOLER and QUEUE_LISTEN_NOTIFY:
    raise ImproperlyConfigured(
        "QUEUE_LISTEN_NOTIFY must be off with DATABASE_TRANSACTION_POOLER: a LISTEN "
        "through a transaction pooler hears nothing once its transaction ends."
    )
QUEUE_WORKER_POLL_INTERVAL = env.float("QUEUE_WORKER_POLL_INTERVAL", default=0.5)
QUEUE_WORKER_GRACE_SECONDS = env.float("QUEUE_WORKER_GRACE_SECONDS", default=30.0)
QUEUE_MAINTENANCE_INTERVAL = env.float("QUEUE_MAINTENANCE_INTERVAL", default=10.0)
QUEUE_MAINTENANCE_LEASE_TTL = env.float("QUEUE_MAINTENANCE_LEASE_TTL", default=30.0)
# Seconds between advances of a queue's claim floor by its claimers (0: off).
QUEUE_CLAIM_FLOOR_INTERVAL = env.float("QUEUE_CLAIM_FLOOR_INTERVAL", default=0.5)
# A worker's slot threads (its --concurrency by default) and the most database
# connections its settings may need before it refuses to start (README,
# "Database connections"; 0: no limit).
QUEUE_WORKER_CONCURRENCY = env.int("QUEUE_WORKER_CONCURRENCY", default=4)
QUEUE_WORKER_MAX_CONNECTIONS = env.int("QUEUE_WORKER_MAX_CONNECTIONS", default=32)

# Django's Tasks API (django-tasks on Django 5.2, django.tasks on Django >= 6):
# tasks become messages of queues of the group TASKS_GROUP (one collection per
# queue name, created on first use with a trigger running them), and
# ``manage.py queue_worker`` runs them. See groupqueues/tasks_backend.py.
TASKS: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "groupqueues.tasks_backend.GroupQueueTaskBackend",
        "QUEUES": [],  # any queue name
        "OPTIONS": {"GROUP": env.str("TASKS_GROUP", default="tasks")},
    }
}

# --- Observability (docs/observability.md) -----------------------------------
# The worker registry: each queue_worker / session_dispatch heartbeats a row.
QUEUE_WORKER_REGISTRY = env.bool("QUEUE_WORKER_REGISTRY", default=True)
QUEUE_WORKER_HEARTBEAT_SECONDS = env.float("QUEUE_WORKER_HEARTBEAT_SECONDS", default=5.0)
QUEUE_WORKER_EXPIRE_SECONDS = env.float("QUEUE_WORKER_EXPIRE_SECONDS", default=60.0)
# /metrics: who may scrape. The client address must be in one of the networks
# AND (unless METRICS_REQUIRE_TOKEN is off) the request must carry a token
# with the metrics:read scope of a staff user.
METRICS_ALLOWED_NETWORKS = env.list("METRICS_ALLOWED_NETWORKS", default=["127.0.0.0/8", "::1/128"])
METRICS_REQUIRE_TOKEN = env.bool("METRICS_REQUIRE_TOKEN", default=True)
METRICS_PERMISSION_CLASSES = ["principals.permissions.CanReadMetrics"]
# How often the maintenance leader recounts dead messages for /metrics.
QUEUE_METRICS_DEAD_REFRESH_SECONDS = env.float("QUEUE_METRICS_DEAD_REFRESH_SECONDS", default=60.0)
# /readyz: which lease is the maintenance leader's, and how recently it must
# have been held.
HEALTH_LEADER_LEASE = "groupqueues.maintenance"
HEALTH_LEADER_MAX_AGE = env.float("HEALTH_LEADER_MAX_AGE", default=60.0)
HEALTH_REQUIRE_LEADER = env.bool("HEALTH_REQUIRE_LEADER", default=True)
# LOG_FORMAT=json: every log line is one JSON object (python-json-logger).
LOG_FORMAT = env.str("LOG_FORMAT", default="text")
if LOG_FORMAT == "json":
    LOGGING = {
        **LOGGING,
        "formatters": {"json": {"()": "queueproject.logging_json.JsonFormatter"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json"}},
    }

# Queue history and database guardrails (issue 16): one sample per collection
# per QUEUE_SAMPLE_INTERVAL seconds, kept QUEUE_SAMPLE_RETENTION seconds;
# workers' PostgreSQL sessions end an idle transaction or a statement after
# these many milliseconds (0: off).
QUEUE_SAMPLE_INTERVAL = env.float("QUEUE_SAMPLE_INTERVAL", default=60.0)
QUEUE_SAMPLE_RETENTION = env.float("QUEUE_SAMPLE_RETENTION", default=7 * 24 * 3600.0)
QUEUE_WORKER_IDLE_IN_TRANSACTION_TIMEOUT_MS = env.int(
    "QUEUE_WORKER_IDLE_IN_TRANSACTION_TIMEOUT_MS", default=60_000
)
QUEUE_WORKER_STATEMENT_TIMEOUT_MS = env.int("QUEUE_WORKER_STATEMENT_TIMEOUT_MS", default=300_000)

# Session queues' blocked heads (issue 20; types and defaults in sessionqueues/conf.py):
# a session whose agent has not been ready this long with entries waiting, and a
# reservation held this long, are listed as blocked (seconds).
SESSIONQUEUES_BLOCKED_NOT_READY_SECONDS = env.float(
    "SESSIONQUEUES_BLOCKED_NOT_READY_SECONDS", default=1800.0
)
SESSIONQUEUES_RESERVATION_DEADLINE_SECONDS = env.float(
    "SESSIONQUEUES_RESERVATION_DEADLINE_SECONDS", default=300.0
)
