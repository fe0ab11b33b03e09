"""The shared library under the site, as healthchecks keeps ``hc/lib``.

Everything the apps (``projects``, ``messaging``, ``webui``) and the surfaces share, and
nothing that knows an app: no module here imports ``projects``, ``messaging`` or
``webui`` (import-linter checks it; see ``[tool.importlinter]`` in ``pyproject.toml``).

``names``, ``limits``, ``ages`` and ``binding`` import no Django either, since the CLI's
client commands use them and must start fast.
"""
