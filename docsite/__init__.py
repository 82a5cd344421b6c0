"""The documentation site's generated pages, each made from its one definition in code, so that
no page can drift from what the code does (``docsite.pages`` lists them):

- ``reference/api.md`` from the OpenAPI document ``shared/vdq/openapi.json`` (``docsite.openapi``);
- ``reference/settings.md`` from ``vdq.core.settings.Settings`` and ``infra.choices.CHOICES``, and
  ``reference/cli.md`` from the ``vdq`` command's parser (``docsite.reference``);
- ``security.md`` from ``SECURITY.md``.

``docsite/hooks.py`` hands them to MkDocs (``mkdocs.yml``); ``python -m docsite`` writes the
committed ones; ``tests/infra/test_docs.py`` builds the site with ``--strict``. Nothing here is
imported by a function or the CLI.
"""
