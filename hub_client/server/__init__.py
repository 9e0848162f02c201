"""A self-hosted registry speaking the subset of the Hugging Face Hub HTTP API that huggingface_hub needs.

Repos are bare git repositories under a root directory; see `registry.py` for the layout, `auth.py` for who may
read and write, and `routes.py` for the endpoints.
"""

from .limits import Limits
from .server import RegistryServer, serve

__all__ = ["Limits", "RegistryServer", "serve"]
