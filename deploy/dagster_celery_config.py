"""Read by `dagster_celery.app` in every worker (on PYTHONPATH in the image): the broker and
result backend, the same as the executor's (pipelines/resources.py reads $SIMAB_CELERY_BROKER)."""

import os

broker_url = os.environ["SIMAB_CELERY_BROKER"]
result_backend = os.environ.get("SIMAB_CELERY_BACKEND") or broker_url
