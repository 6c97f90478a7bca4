"""The contenders the service is measured against (floors, dramatiq, Celery), each a program the ``peers`` step starts."""
