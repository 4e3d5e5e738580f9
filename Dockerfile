# syntax=docker/dockerfile:1
# One image for raftcron nodes and workers: `docker run IMAGE serve` runs a node,
# any other raftcron command works the same way (`docker run IMAGE status ...`).
# No secret is baked in: give the cluster secret at run time as a file
# (RAFTCRON_CLUSTER_SECRET_FILE, e.g. a compose or swarm secret).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# An unprivileged user owning the data directory. The Raft journal and dump files are
# pickles, so the directory is private to that user (0700).
RUN groupadd --system --gid 10001 raftcron \
 && useradd --system --uid 10001 --gid raftcron --home-dir /var/lib/raftcron --no-create-home \
        --shell /usr/sbin/nologin raftcron \
 && install -d -o raftcron -g raftcron -m 0700 /var/lib/raftcron

WORKDIR /src

# Dependencies first, in their own layer: rebuilt only when pyproject.toml changes. The image runs
# nodes, so it takes the `server` extra besides the worker SDK's own dependencies.
COPY pyproject.toml ./
RUN python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['server']))" \
        > requirements.txt \
 && pip install -r requirements.txt

# The project itself (README.md is the package's long description; the glob copies it when present).
COPY pyproject.toml README.m[d] ./
COPY scheduler ./scheduler
COPY worker ./worker
RUN pip install --no-deps . \
 && pip check \
 && cd / && rm -rf /src

WORKDIR /var/lib/raftcron
ENV RAFTCRON_DATA_DIR=/var/lib/raftcron
# Declared after the directory got its owner and mode, so a fresh named volume inherits both.
VOLUME ["/var/lib/raftcron"]

# The HTTP port: Prometheus metrics (/metrics), the probes (/healthz, /readyz; no token) and the
# dashboard. Off loopback the dashboard wants the principals file's tokens; a node run with
# RAFTCRON_INSECURE and no principals file needs RAFTCRON_INSECURE_DASHBOARD=true as well, or
# RAFTCRON_METRICS= (empty) to serve no HTTP port (and then no probes).
ENV RAFTCRON_METRICS=0.0.0.0:7300

# Raft (peer to peer), gRPC (clients, workers, the CLI) and HTTP (metrics, probes, dashboard).
EXPOSE 7100 7200 7300

USER 10001:10001

# Ready: a member with a connected leader whose epoch it applied, caught up (see README,
# Probes). The image has Python, not curl: the check is a few lines of urllib. Set
# RAFTCRON_HEALTH_URL when RAFTCRON_METRICS names another port. A worker runs no HTTP port:
# docker-compose.yml disables the check for it.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD python -m scheduler.observability.healthcheck "${RAFTCRON_HEALTH_URL:-http://127.0.0.1:7300/readyz}"

ENTRYPOINT ["raftcron"]
CMD ["serve"]
