# The product in one image: `docker compose up` (compose.yaml) runs it with
# PostgreSQL; the same image runs the web server, the worker and maintenance.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY . .
# Static files (admin, Swagger UI, Redoc) collected once into STATIC_ROOT for WhiteNoise.
RUN DEBUG=1 python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 queues \
    && chown -R queues /app/staticfiles
USER queues

EXPOSE 8000
# Web: the ASGI app under uvicorn. compose.yaml runs the worker and maintenance
# from this image with their own commands, and `migrate` once before them.
CMD ["sh", "-c", "exec uvicorn queueproject.asgi:application --host 0.0.0.0 --port 8000 --workers ${WEB_CONCURRENCY:-2} --proxy-headers --no-server-header"]
