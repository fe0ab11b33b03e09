# ai-memory server: one host of a deployment (README.md, "Deployment").
#
#   docker build -t ai-memory .
#   docker run -p 8000:8000 --env-file ai-memory.env ai-memory
#
# The image serves on 0.0.0.0:8000, a public bind: it refuses to start anonymously (set
# AI_MEMORY_ROOT_TOKEN), and it turns on secure cookies, the https redirect of the web pages
# and HSTS, as it expects a TLS-terminating proxy in front that sets X-Forwarded-Proto.
# Without DATABASE_URL it keeps SQLite in the /data volume: one container, one host.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/ai-memory
WORKDIR /src
# .dockerignore keeps the context to what the wheel holds: no .git, .venv, var/ (a local
# data dir holds a secret key and a database) or tests.
COPY . .
RUN /opt/ai-memory/bin/pip install .

FROM python:3.11-slim
ENV PATH=/opt/ai-memory/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    AI_MEMORY_DATA_DIR=/data
# The same base image, so the virtualenv's interpreter links resolve unchanged.
COPY --from=build /opt/ai-memory /opt/ai-memory
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home \
        --shell /usr/sbin/nologin ai-memory \
    && install -d -o ai-memory -g ai-memory -m 0700 /data
USER ai-memory
WORKDIR /data
# Collected static files always, the generated secret key (without SECRET_KEY) and, without
# DATABASE_URL, the SQLite database.
VOLUME ["/data"]
EXPOSE 8000
# /healthz is a database round trip. Host "localhost": the default ALLOWED_HOSTS of a
# public bind is "*"; a deployment that names its hosts keeps localhost among them.
HEALTHCHECK --interval=30s --timeout=6s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request as r; r.urlopen(r.Request('http://127.0.0.1:8000/healthz', headers={'Host': 'localhost'}), timeout=5)"]
# Exec form: gunicorn's master is PID 1 and gets docker stop's SIGTERM (graceful, 10 s).
CMD ["ai-memory", "serve", "--bind", "0.0.0.0:8000"]
