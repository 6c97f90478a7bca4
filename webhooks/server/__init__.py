"""The web process's HTTP server: gunicorn's threaded worker, reading requests without a thread.

``worker`` is the gunicorn worker class the Procfile runs (``gunicorn_conf.worker_class``):
it reads each request, head and body, in its event loop (``framing`` says where a request
ends) and hands only whole requests to its threads, in turns by client (``turns``), so a
slow client holds a socket, never a thread. ``answers`` writes the JSON answers the
server gives itself (408, 413, 429, 431, …) in the API's error shape.
"""
