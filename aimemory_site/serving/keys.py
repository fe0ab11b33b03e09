"""WSGI environ keys the server offers the application."""

#: The zero-argument callable that closes the connection after this response (gunicorn
#: decides keep-alive itself and ignores a ``Connection`` header set by the application).
CLOSE_CONNECTION = "aimemory.close_connection"
