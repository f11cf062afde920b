"""The search page: a person's window on the vaults, served by ``hybrid serve --http`` at ``/``.

Plain HTML, CSS and JavaScript from package data (``static/``): no build step, no CDN, works
offline. The page talks to its own JSON routes under ``/ui/api/`` (:mod:`hybrid.faces.ui.routes`),
which serve the owner's view and so need a signed-in session (:mod:`hybrid.faces.ui.session`):
``hybrid ui`` opens the page through a one-time sign-in link, or the server's token is typed
into the page's form. Re-index runs started from the page: :mod:`hybrid.faces.ui.jobs`.
"""

from pathlib import Path

STATIC = Path(__file__).parent / "static"
