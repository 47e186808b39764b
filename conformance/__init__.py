"""The conformance engine: data-driven cases run against refimpl, torch or any module.

The case format is ``conformance/FORMAT.md``. The modules, bottom up:

- ``yamlio``: YAML with line numbers, and the one-line ``CaseFileError``;
- ``model``: the validated, expanded form of a case (plain data);
- ``schema`` and ``loader``: validation, defaults, parameter expansion, duplicate ids;
- ``selection``: ``--area``/``--tag``/``--device``/``-k`` filters;
- ``targets``: the target module and its small adapter (private names, helpers);
- ``inputs``: seeded numpy inputs turned into target tensors;
- ``values`` and ``checks``: normalisation, comparison and the check kinds;
- ``execute``: one case in this process; ``runner``: many cases in worker processes;
- ``golden``, ``report`` and ``seedmap``: goldens, JSON/JUnit reports, coverage.

``conformance/conftest.py`` is the pytest plugin that collects the cases as tests.
"""
