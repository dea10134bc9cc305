"""Read by `dagster_celery.app` in every worker (on PYTHONPATH in the image): the broker and
result backend, the same as the executor's (`SIMAB_CELERY_BROKER`, `SIMAB_CELERY_BACKEND`: ops.settings)."""

from ops.environment import offline_defaults
from ops.settings import load

offline_defaults()
_settings = load()
broker_url = _settings.celery_broker
result_backend = _settings.celery_backend or broker_url
