"""The local web app (``accelmap serve``): a thin FastAPI layer over the same public API as the
CLI, with one static page (plain HTML + JS, plotly served from the installed plotly package).

Needs the ``web`` extra (fastapi, uvicorn, plotly, python-multipart). ``app.create_app`` builds
the app; ``forms`` holds the request bodies, named as the CLI's flags; ``jobs`` runs them.
"""
