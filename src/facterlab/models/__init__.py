"""Model backends (docs/FACTER.md §5): sentence encoder, causal-LM recommenders, parsing and caches.

``from facterlab.models import load_encoder, make_recommender``.  Importing this package is cheap:
torch, transformers and sentence-transformers are imported only when a model is built.
"""

from facterlab.models.encoder import load_encoder
from facterlab.models.parsing import parse_titles
from facterlab.models.rankers import make_recommender

__all__ = ["load_encoder", "make_recommender", "parse_titles"]
