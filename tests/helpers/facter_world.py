"""The FACTER tests' hand-built world: :func:`facterlab.data.handbuilt.make_world` (also notebook 09's
positive control)."""

from facterlab.data.handbuilt import OCCS, TASTES, make_world

__all__ = ["OCCS", "TASTES", "make_world"]
