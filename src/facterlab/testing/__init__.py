"""Tools to try facterlab's served backend without a GPU: :mod:`facterlab.testing.server`, a small
OpenAI-compatible server on 127.0.0.1 (``python -m facterlab.testing.server``; docs/SCALING.md)."""
