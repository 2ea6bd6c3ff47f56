"""Settings for the GPU workspace portal, read from the environment.

One file, typed readers that fail loudly (``portal/env.py``). ``PORTAL_ENV`` picks the defaults:

* ``production`` (default): DEBUG off, ``DJANGO_SECRET_KEY`` required, secure cookies.
* ``demo``: the one-command demo (SQLite, in-process broker, simulated cluster); a fixed insecure key.
  DEBUG is off here too, so visitors see the portal's own 403/404/500 pages, never Django's debug pages
  (which list every URL pattern and settings); WhiteNoise serves the static files without DEBUG.
  ``DJANGO_DEBUG=true`` turns the debug pages back on for someone developing.
* ``test``: like demo, plus a fast password hasher. ``portal/settings_test.py`` selects it for pytest.

Every variable is listed with a comment in ``docker/.env.example``.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from portal import typing_runtime
from portal.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_path,
    env_secret,
    env_str,
)
from portal.metrics.rules import Thresholds as AlertThresholds
from portal.sso.config import read_sso_config
from scheduling.loops import tasknames
from scheduling.loops.schedule import beat_schedule

typing_runtime.enable_for_django()

BASE_DIR = Path(__file__).resolve().parent.parent
PORTAL_ENV = env_choice("PORTAL_ENV", "production", ("production", "demo", "test"))
IS_PRODUCTION = PORTAL_ENV == "production"

# Runtime files (SQLite database, broker folders, kubeconfig of the simulated cluster) live here.
VAR_DIR = env_path("PORTAL_VAR_DIR", BASE_DIR / "var")

DEBUG = env_bool("DJANGO_DEBUG", False)

_secret = env_secret("DJANGO_SECRET_KEY")
if not _secret:
    if IS_PRODUCTION:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) must be set when PORTAL_ENV=production."
        )
    _secret = f"insecure-{PORTAL_ENV}-only-key-never-use-in-production"
SECRET_KEY = _secret

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", [] if IS_PRODUCTION else ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "portal",
    "workspaces",
    "scheduling",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Before anything reads the URL: NUL in a path or query parameter is a 500 on PostgreSQL.
    "portal.refuse_nul.RefuseNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"
AUTH_USER_MODEL = "portal.User"

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
                "portal.context_processors.navigation",
                "workspaces.notifications.context_processors.unread_notifications",
            ],
        },
    },
]


def _database() -> dict[str, object]:
    url = env_str("DATABASE_URL")
    if not url:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        # The demo's worker threads, beat and web server all write: take the write lock at BEGIN (a read
        # transaction that later writes cannot then fail with "database is locked" at once), wait for it
        # rather than fail, and let readers go on during writes (WAL).
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "portal.sqlite3",
            "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 20, "init_command": "PRAGMA journal_mode=WAL;"},
        }
    try:
        config: dict[str, object] = dict(dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True))
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a usable database URL: {exc}") from None
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
if REDIS_URL and not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(f"REDIS_URL={REDIS_URL!r} must start with redis://, rediss:// or unix://.")

CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
if PORTAL_ENV == "test":
    # Hashing is deliberately slow; tests create many users.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Single sign-on with OpenID Connect (portal/sso/, docs/sso.md): on when OIDC_RP_CLIENT_ID is set; every OIDC_*
# variable is read and checked in portal/sso/config.py. Local accounts (password) keep working beside it.
SSO = read_sso_config()
globals().update(SSO.library_settings())  # the names mozilla-django-oidc reads (OIDC_OP_*, OIDC_RP_*)
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"] + (
    ["portal.sso.backend.PortalOIDCBackend"] if SSO.enabled else []
)

LANGUAGE_CODE = "en-gb"
TIME_ZONE = env_str("PORTAL_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

# Static files are served by the app itself (WhiteNoise) in every mode: no CDN, the browser works offline.
STATIC_URL = "static/"
STATIC_ROOT = env_path("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles" if IS_PRODUCTION else VAR_DIR / "staticfiles")
if not IS_PRODUCTION:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing root even when unused
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "portal.staticfinders.PlotlyFinder",
]
# Serve straight from the finders when nothing was collected (demo, tests); production images collect.
WHITENOISE_USE_FINDERS = not IS_PRODUCTION or env_bool("WHITENOISE_USE_FINDERS", False)
# The demo runs with DEBUG off: look the files up on each request, so edited CSS shows without a restart.
WHITENOISE_AUTOREFRESH = DEBUG or PORTAL_ENV == "demo"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if IS_PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", IS_PRODUCTION)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("DJANGO_BEHIND_TLS_PROXY", False) else None
SESSION_COOKIE_AGE = env_int("DJANGO_SESSION_AGE_SECONDS", 8 * 3600, minimum=300)
# Every page and refresh reads the session: from Redis where there is one shared by every web process (written
# through to the database, which stays the record; a cache failure falls back to it). Without Redis (the demo)
# the cache is per process, so sessions stay in the database alone: a sign-out must reach every process.
if REDIS_URL:
    SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

REST_FRAMEWORK = {
    # Token first, so an anonymous API call gets 401 with a WWW-Authenticate header rather than 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Caps ?limit= (portal/api/pagination.py): an unbounded one reached the database as LIMIT.
    "DEFAULT_PAGINATION_CLASS": "portal.api.pagination.ClampedLimitOffsetPagination",
    "PAGE_SIZE": 100,
    # JSON bodies with a depth limit and no NUL (portal/api/parsers.py); forms as DRF's defaults.
    "DEFAULT_PARSER_CLASSES": [
        "portal.api.parsers.SafeJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # In a browser, DRF's page without its forms and buttons (portal/api/renderers.py): it offered changes
    # judged by permission classes alone, so buttons its viewer may not use.
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "portal.api.renderers.ReadOnlyBrowsableAPIRenderer",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "portal.api.errors.exception_handler",
    # OPTIONS on collection endpoints that take PUT (portal/api/metadata.py).
    "DEFAULT_METADATA_CLASS": "portal.api.metadata.PortalMetadata",
    # Per signed-in user; anonymous callers (only the schema and docs answer them) per address.
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.UserRateThrottle",
        "rest_framework.throttling.AnonRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "user": env_str("API_THROTTLE_USER", "6000/hour"),
        "anon": env_str("API_THROTTLE_ANON", "600/hour"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU workspace portal API",
    "DESCRIPTION": "Self-service GPU workspaces, team quotas and chargeback.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# Celery. Broker semantics are spelled out because the defaults lose work on a crash:
# * acks_late: a task is acknowledged after it ran, so a worker killed mid-task leaves it to be redelivered
#   (every task is idempotent for this reason);
# * prefetch 1: a worker holds at most one unstarted task, so a slow task doesn't strand others behind it;
# * visibility_timeout: Redis redelivers an unacknowledged task after this long, so it must exceed the
#   longest task (CELERY_TASK_TIME_LIMIT), or a running task would be handed to a second worker.
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5
# Without Redis: the demo shares a broker folder between processes; tests keep messages in memory.
CELERY_BROKER_URL = REDIS_URL or ("memory://" if PORTAL_ENV == "test" else "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    for _folder in ("queue", "processed", "control"):
        (VAR_DIR / "broker" / _folder).mkdir(parents=True, exist_ok=True)
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = (
    {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=CELERY_TASK_TIME_LIMIT + 60)}
    if REDIS_URL
    else {
        # Without Redis (the demo) the broker is a folder that worker and web processes share.
        "polling_interval": 0.2,
        "data_folder_in": str(VAR_DIR / "broker" / "queue"),
        "data_folder_out": str(VAR_DIR / "broker" / "queue"),
        "processed_folder": str(VAR_DIR / "broker" / "processed"),
        "control_folder": str(VAR_DIR / "broker" / "control"),
        "store_processed": False,
    }
)
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("CELERY_BROKER_CONNECTION_TIMEOUT", 3.0, minimum=0.1)
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TIMEZONE = "UTC"


# Kubernetes: a kubeconfig file (the simulated cluster writes one), or the pod's service account.
KUBE_IN_CLUSTER = env_bool("KUBE_IN_CLUSTER", False)
KUBECONFIG = env_str("KUBECONFIG")
KUBE_REQUEST_TIMEOUT = env_float("KUBE_REQUEST_TIMEOUT", 10.0, minimum=0.1)
if KUBE_IN_CLUSTER and KUBECONFIG:
    raise ImproperlyConfigured("Set either KUBE_IN_CLUSTER=true or KUBECONFIG, not both.")

# Workspace request policy (operators tune; team policies arrive with the quota work).
WORKSPACE_DEFAULT_RUNTIME_HOURS = env_int("WORKSPACE_DEFAULT_RUNTIME_HOURS", 8, minimum=1)
WORKSPACE_MAX_RUNTIME_HOURS = env_int("WORKSPACE_MAX_RUNTIME_HOURS", 72, minimum=WORKSPACE_DEFAULT_RUNTIME_HOURS)
WORKSPACE_MAX_EXTEND_HOURS = env_int("WORKSPACE_MAX_EXTEND_HOURS", 24, minimum=1)
WORKSPACE_MAX_HOME_GIB = env_int("WORKSPACE_MAX_HOME_GIB", 500, minimum=1)
WORKSPACE_MAX_WORKERS = env_int("WORKSPACE_MAX_WORKERS", 8, minimum=1, maximum=64)
# Where users open notebooks on a real cluster: https://<host>/ws/<namespace>/<name>/ behind an Ingress.
# Empty: the API server's service proxy path, which is what the simulated cluster serves.
NOTEBOOK_INGRESS_HOST = env_str("NOTEBOOK_INGRESS_HOST")
NOTEBOOK_INGRESS_TLS = env_bool("NOTEBOOK_INGRESS_TLS", True)
NOTEBOOK_INGRESS_TLS_SECRET = env_str("NOTEBOOK_INGRESS_TLS_SECRET")
NOTEBOOK_INGRESS_CLASS = env_str("NOTEBOOK_INGRESS_CLASS")
# Without an Ingress: where browsers reach the service proxy when the kubeconfig's server is not for them
# (e.g. `kubectl proxy`, or the simulated cluster's plain-HTTP notebook door in the demo). Empty: that server.
NOTEBOOK_PROXY_URL = env_str("NOTEBOOK_PROXY_URL")
# GPU telemetry (scheduling/telemetry/sources.py): "prometheus" (PROMETHEUS_URL), "scrape" (dcgm-exporter or
# node-agent endpoints, DCGM_SCRAPE_URLS) or "" (none: nothing is reclaimed for GPU idleness).
TELEMETRY_SOURCE = env_choice("TELEMETRY_SOURCE", "", ("", "prometheus", "scrape"))
PROMETHEUS_URL = env_str("PROMETHEUS_URL", "http://127.0.0.1:9090")
DCGM_SCRAPE_URLS = env_list("DCGM_SCRAPE_URLS", [])
TELEMETRY_TIMEOUT_SECONDS = env_float("TELEMETRY_TIMEOUT_SECONDS", 5.0, minimum=0.1)
# Seconds between telemetry collections (beat), and how many notebooks' Jupyter are read at once.
TELEMETRY_INTERVAL_SECONDS = env_float("TELEMETRY_INTERVAL_SECONDS", 30.0, minimum=1.0)
TELEMETRY_NOTEBOOK_CONCURRENCY = env_int("TELEMETRY_NOTEBOOK_CONCURRENCY", 16, minimum=1, maximum=128)
# Self-refreshing lists and polled API answers carry an ETag (portal/conditional.py): unchanged rows, telemetry
# and ledger answer 304. What follows the clock alone on them (ages, time left, stale marks) may lag this long.
CONDITIONAL_GET_SECONDS = env_int("CONDITIONAL_GET_SECONDS", 30, minimum=1, maximum=300)
# Operators' bounds on the idle rules leads set per team (scheduling/quota/actions.py do_set_idle_policy).
IDLE_THRESHOLD_PERCENT_MAX = env_int("IDLE_THRESHOLD_PERCENT_MAX", 30, minimum=1, maximum=100)
IDLE_WINDOW_MINUTES_MIN = env_int("IDLE_WINDOW_MINUTES_MIN", 30, minimum=5)
IDLE_WINDOW_MINUTES_MAX = env_int("IDLE_WINDOW_MINUTES_MAX", 1440, minimum=IDLE_WINDOW_MINUTES_MIN)
IDLE_GRACE_MINUTES_MIN = env_int("IDLE_GRACE_MINUTES_MIN", 5, minimum=1)
IDLE_KEEP_ALIVE_HOURS_MAX = env_int("IDLE_KEEP_ALIVE_HOURS_MAX", 12, minimum=1)
IDLE_KEEP_ALIVES_MAX = env_int("IDLE_KEEP_ALIVES_MAX", 5, minimum=0)
# How many real seconds one minute of a team's idle rules lasts: 60. The demo (6: ten times faster, so idle
# reclaim can be watched within minutes) and the full-stack tests make it shorter.
IDLE_POLICY_MINUTE_SECONDS = env_float("IDLE_POLICY_MINUTE_SECONDS", 6.0 if PORTAL_ENV == "demo" else 60.0, minimum=0.1)
# Samples stay raw this many hours, then one row per workspace and hour, kept this many days.
TELEMETRY_RAW_HOURS = env_int("TELEMETRY_RAW_HOURS", 24, minimum=1)
TELEMETRY_RETENTION_DAYS = env_int("TELEMETRY_RETENTION_DAYS", 90, minimum=1)
# Simulated cluster only: how long training-job pods "run" there (0 on a real cluster: the command decides).
SIMCLUSTER_JOB_SECONDS = env_int("SIMCLUSTER_JOB_SECONDS", 0 if IS_PRODUCTION else 30, minimum=0)
# Seconds between scheduling cycles and reconcile passes run by beat.
SCHEDULING_INTERVAL_SECONDS = env_float("SCHEDULING_INTERVAL_SECONDS", 5.0, minimum=0.5)
RECONCILE_INTERVAL_SECONDS = env_float("RECONCILE_INTERVAL_SECONDS", 5.0, minimum=0.5)
# The cycle asked for while another ran starts this long after that one ended, and what is asked for meanwhile
# joins it: releases arrive one by one, and cycles back to back would each take up one of them at the cost of
# a whole cycle (README, Benchmarks). 0 in the test process, whose tests run cycles one after another.
SCHEDULING_MIN_GAP_SECONDS = env_float("SCHEDULING_MIN_GAP_SECONDS", 0.0 if PORTAL_ENV == "test" else 0.25, minimum=0.0)
# One scheduling cycle's admissions are provisioned in tasks of this many workspaces, each creating the objects
# of this many workspaces at once (scheduling/loops/provisioning.py, provision_many).
PROVISION_BATCH_SIZE = env_int("PROVISION_BATCH_SIZE", 20, minimum=1, maximum=500)
PROVISION_CONCURRENCY = env_int("PROVISION_CONCURRENCY", 8, minimum=1, maximum=64)
# Waiting requests per team whose reason the scheduling cycle keeps current (figures and all); the ones
# behind them read "Waiting in line", which does not change every cycle (scheduling/loops/cycle.py).
QUEUE_EXPLAINED_PER_TEAM = env_int("QUEUE_EXPLAINED_PER_TEAM", 20, minimum=1)
# Of each shape of waiting request (same team, owner and request), the oldest this many are what a cycle reads
# and decides on; one behind them can start only after all of them, and a cycle that admits them all asks for
# another (scheduling/loops/cycle_rows.py). So a cycle costs the same with 100 or 14,000 requests queued.
QUEUE_CONSIDERED_PER_SHAPE = env_int("QUEUE_CONSIDERED_PER_SHAPE", 20, minimum=1)
# The scheduling cycle keeps the cluster's capacity between cycles from watches on nodes and pods
# (scheduling/live_capacity.py) instead of listing every node and pod each cycle. Off in the test process,
# whose tests change the cluster and at once run a cycle in the same breath; the full-stack workers use it.
SCHEDULING_WATCH_CLUSTER = env_bool("SCHEDULING_WATCH_CLUSTER", PORTAL_ENV != "test")
# How long a borrower is warned before it is preempted to give a team its guarantee back.
PREEMPTION_NOTICE_SECONDS = env_float("PREEMPTION_NOTICE_SECONDS", 120.0, minimum=0.0)
# Half-life of the decayed usage that orders the queue by fair share (what a team used this long ago
# counts half); 0 uses only what each team holds now.
FAIR_SHARE_HALF_LIFE_SECONDS = env_float("FAIR_SHARE_HALF_LIFE_SECONDS", 4 * 3600.0, minimum=0.0)
# Retries of a cluster task on transient errors (exponential backoff, 1 s to 30 s): an optimisation only,
# since the reconcile loop finishes what a task gave up on.
KUBE_TASK_MAX_RETRIES = env_int("KUBE_TASK_MAX_RETRIES", 8, minimum=0)
# An admitted workspace without objects for this long had its provisioning task lost: enqueue it again.
PROVISIONING_RETRY_SECONDS = env_float("PROVISIONING_RETRY_SECONDS", 30.0, minimum=1.0)
# Seconds between reconcile passes that also sweep orphaned services, secrets and volumes (pods and jobs:
# every pass).
ORPHAN_SWEEP_SECONDS = env_float("ORPHAN_SWEEP_SECONDS", 60.0, minimum=1.0)
# Billing (portal/billing/, docs/billing.md). One currency for every price; ISO 4217 code.
BILLING_CURRENCY = env_str("BILLING_CURRENCY", "EUR")
# Two ledger observations further apart than this are a gap: what happened in it is not billed unless the
# same pod was seen running on both sides of it.
BILLING_OBSERVATION_GAP_SECONDS = env_float(
    "BILLING_OBSERVATION_GAP_SECONDS", 3 * RECONCILE_INTERVAL_SECONDS + 5.0, minimum=1.0
)
# How often the teams' budgets are checked against their thresholds (50, 80, 100 %) and leads told.
BILLING_BUDGET_CHECK_SECONDS = env_float("BILLING_BUDGET_CHECK_SECONDS", 300.0, minimum=10.0)
# How often a reconcile pass also lists nodes to record the fleet's GPUs (the capacity ledger).
BILLING_CAPACITY_SECONDS = env_float("BILLING_CAPACITY_SECONDS", 60.0, minimum=1.0)

# Prometheus metrics at /metrics (docs/metrics.md): Prometheus sends "Authorization: Bearer <token>". Unset,
# /metrics answers 403 in production (demo and tests: open, on loopback). Or PORTAL_METRICS_TOKEN_FILE.
PORTAL_METRICS_TOKEN = env_secret("PORTAL_METRICS_TOKEN") or ""
# Events younger than this are counted at a later scrape: a transaction's events become visible only when it
# commits (a scheduling cycle commits its admissions at its end), and a skipped event is never counted.
METRICS_EVENT_SETTLE_SECONDS = env_float("METRICS_EVENT_SETTLE_SECONDS", 60.0, minimum=0.0)
# Alert thresholds (defaults in portal/metrics/rules.py): the Prometheus rules (manage.py alert_rules) and the
# in-portal alerts read the same.
_ALERTS = AlertThresholds()
ALERT_QUEUE_WAIT_P95_SECONDS = env_float("ALERT_QUEUE_WAIT_P95_SECONDS", _ALERTS.queue_wait_p95_seconds, minimum=1.0)
ALERT_WITHIN_QUOTA_WAIT_MINUTES = env_float(
    "ALERT_WITHIN_QUOTA_WAIT_MINUTES", _ALERTS.within_quota_wait_minutes, minimum=1.0
)
ALERT_CONTENTION_MINUTES = env_float("ALERT_CONTENTION_MINUTES", _ALERTS.contention_minutes, minimum=1.0)
ALERT_IDLE_SHARE = env_float("ALERT_IDLE_SHARE", _ALERTS.idle_share, minimum=0.01)
ALERT_IDLE_MINUTES = env_float("ALERT_IDLE_MINUTES", _ALERTS.idle_minutes, minimum=1.0)
ALERT_LOOP_STALL_SECONDS = env_float("ALERT_LOOP_STALL_SECONDS", _ALERTS.loop_stall_seconds, minimum=10.0)
ALERT_KUBE_API_ERRORS_PER_MINUTE = env_float(
    "ALERT_KUBE_API_ERRORS_PER_MINUTE", _ALERTS.kube_api_errors_per_minute, minimum=0.1
)
ALERT_BUDGET_USED_RATIO = env_float("ALERT_BUDGET_USED_RATIO", _ALERTS.budget_used_ratio, minimum=0.01)
# How often the worker checks the in-portal alerts against those thresholds (docs/alerts.md).
ALERT_CHECK_SECONDS = env_float("ALERT_CHECK_SECONDS", 60.0, minimum=10.0)
# How long kube-scheduler may refuse a pod pinned by the placement engine before the portal unpins it.
PLACEMENT_GRACE_SECONDS = env_float("PLACEMENT_GRACE_SECONDS", 10.0, minimum=0.0)
# MIG layouts that follow the queue (scheduling/loops/mig_repartition.py, docs/dynamic-mig.md): an idle GPU node
# is repartitioned (cordoned, nvidia.com/mig.config set, watched, uncordoned) when that serves queued requests.
# Off by default: it changes the cluster's hardware layout, an operator's decision; the demo turns it on.
MIG_REPARTITION_ENABLED = env_bool("MIG_REPARTITION_ENABLED", PORTAL_ENV == "demo")
MIG_REPARTITION_INTERVAL_SECONDS = env_float("MIG_REPARTITION_INTERVAL_SECONDS", 15.0, minimum=1.0)
# Only requests queued this long count as demand: one the next cycle admits anyway must not split a GPU.
MIG_REPARTITION_MIN_WAIT_SECONDS = env_float("MIG_REPARTITION_MIN_WAIT_SECONDS", 60.0, minimum=0.0)
# A change still pending (or rebooting) this long has failed: the old layout is asked for again.
MIG_REPARTITION_TIMEOUT_SECONDS = env_float("MIG_REPARTITION_TIMEOUT_SECONDS", 900.0, minimum=10.0)
# A node whose repartition failed is left alone this long.
MIG_REPARTITION_RETRY_SECONDS = env_float("MIG_REPARTITION_RETRY_SECONDS", 3600.0, minimum=0.0)
# The control loops have queues of their own next to the default one, so that they never wait behind a
# backlog of provisioning tasks (and expire there): a finished job is then noticed, and its quota handed on,
# within a period even while hundreds of workspaces are being created. The reconcile pass goes to the
# control queue; the scheduling cycle to the scheduler queue, which a worker of one pool process consumes
# (the `scheduler` service): the cycle keeps its view of the cluster from pod and node watches, and one
# process watching is cheaper than every pool process of the general worker watching (docs/architecture.md).
CELERY_CONTROL_TASKS = tasknames.CONTROL
CELERY_CONTROL_QUEUE_SUFFIX = ".control"  # the control queue of queue Q is Q + this (portal/queue.py)
CELERY_SCHEDULER_TASKS = tasknames.SCHEDULER
CELERY_SCHEDULER_QUEUE_SUFFIX = ".scheduler"
CELERY_TASK_ROUTES = {
    **{name: {"queue": CELERY_TASK_DEFAULT_QUEUE + CELERY_CONTROL_QUEUE_SUFFIX} for name in CELERY_CONTROL_TASKS},
    **{name: {"queue": CELERY_TASK_DEFAULT_QUEUE + CELERY_SCHEDULER_QUEUE_SUFFIX} for name in CELERY_SCHEDULER_TASKS},
}
# What runs every few seconds, and the reasons: scheduling/loops/schedule.py.
CELERY_BEAT_SCHEDULE = beat_schedule(
    scheduling_interval=SCHEDULING_INTERVAL_SECONDS,
    reconcile_interval=RECONCILE_INTERVAL_SECONDS,
    telemetry_interval=TELEMETRY_INTERVAL_SECONDS,
    budget_interval=BILLING_BUDGET_CHECK_SECONDS,
    alert_interval=ALERT_CHECK_SECONDS,
    mig_interval=MIG_REPARTITION_INTERVAL_SECONDS,
)

# Notifications (workspaces/notifications/, docs/notifications.md). Mail goes through Django's mail framework:
# SMTP in production; the demo and tests print mail on the console unless EMAIL_HOST names a server.
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend"
    if IS_PRODUCTION or EMAIL_HOST
    else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = EMAIL_HOST or "localhost"
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1, maximum=65535)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
if EMAIL_USE_TLS and EMAIL_USE_SSL:
    raise ImproperlyConfigured("Set EMAIL_USE_TLS (STARTTLS, port 587) or EMAIL_USE_SSL (port 465), not both.")
# A mail server that does not answer must not hold a worker for long: the delivery task retries later.
EMAIL_TIMEOUT = env_float("EMAIL_TIMEOUT_SECONDS", 10.0, minimum=0.1)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "GPU portal <gpu-portal@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
# Where people reach the portal, for the links in emails and webhook posts (no trailing slash needed).
PORTAL_BASE_URL = env_str("PORTAL_BASE_URL", "http://127.0.0.1:8000")
if not PORTAL_BASE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"PORTAL_BASE_URL={PORTAL_BASE_URL!r} must start with http:// or https://.")
NOTIFY_WEBHOOK_TIMEOUT_SECONDS = env_float("NOTIFY_WEBHOOK_TIMEOUT_SECONDS", 5.0, minimum=0.1)
# Tries per channel (email, webhook) of one notification, the first included; retries back off from 30 s.
NOTIFY_MAX_ATTEMPTS = env_int("NOTIFY_MAX_ATTEMPTS", 3, minimum=1, maximum=10)
# Owners are warned this many minutes before a workspace reaches its runtime limit (once per run).
NOTIFY_RUNTIME_WARNING_MINUTES = env_int("NOTIFY_RUNTIME_WARNING_MINUTES", 30, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR")),
    },
}
