# dealtrail image: the `dealtrail` command line (worker, projector, publisher, report ...).
# Build: docker build -t dealtrail:local .     Run: docker run --rm dealtrail:local --help
# The base image pinned to a patch release (the Python the lock files are resolved for).
FROM python:3.11.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The locked dependencies first, checked against their hashes (a layer that changes only with the
# lock); then only what `pip install .` needs (pyproject.toml reads README.md; package data lives
# in the packages), without dependencies: the image runs exactly the locked versions.
# Debian's Chromium prints report PDFs (dealtrail report --pdf, the console's Sign button, the
# projector's signed revisions) headless, as the image's unprivileged user (--no-sandbox); DejaVu
# is the font it prints with. No browser is downloaded at run time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends chromium fonts-dejavu-core \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r requirements.lock
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY streams ./streams
COPY projections ./projections
COPY dealtrail ./dealtrail
RUN pip install --no-cache-dir --no-deps .

# Unprivileged user; /data (DuckDB store, reports, event files) belongs to it, so a named
# volume mounted there starts out writable.
RUN groupadd --system --gid 10001 dealtrail \
    && useradd --system --uid 10001 --gid dealtrail --home-dir /data --no-create-home \
       --shell /usr/sbin/nologin dealtrail \
    && mkdir -p /data \
    && chown dealtrail:dealtrail /data

ENV DEALTRAIL_DB=/data/dealtrail.duckdb \
    DEALTRAIL_OUT=/data/report \
    DEALTRAIL_REPORTS__CHROMIUM=/usr/bin/chromium

USER dealtrail
WORKDIR /data
VOLUME ["/data"]

ENTRYPOINT ["dealtrail"]
CMD ["--help"]
