"""Database backends of the server (Django's ``ENGINE``)."""
