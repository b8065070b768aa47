"""Dashboard: the board live in a browser (FastAPI + Jinja2, vendored assets)."""
