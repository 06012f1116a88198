"""The developer portal: accounts, sessions and the Apps section, served at ``/portal/``.

Off unless ``parcelsearch serve --portal``. Users are added on the command line
(``parcelsearch portal add-user``); each signs in and manages their own apps (keys), seeing
the gateway's own counts for them. Everything lives in the key store the gateway uses.

Modules: :mod:`~.passwords` (scrypt), :mod:`~.storage` (tables, usage, sign-ins),
:mod:`~.pages` (Jinja2 templates in ``templates/``, the usage chart, the key's snippets),
:mod:`~.routes` (the ASGI app), :mod:`~.commands` (the CLI). ``static/`` holds the stylesheet
and the copy-button script, served from the portal's own origin.
"""
