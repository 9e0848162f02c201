"""A self-hosted registry speaking the subset of the Hugging Face Hub HTTP API that huggingface_hub needs.

Repos are bare git repositories under a root directory; see `registry.py` for the layout, `auth.py` for who may
read and write, and `routes.py` for the endpoints.
"""

from .limits import Limits

__all__ = ["Limits", "RegistryServer", "serve"]


def __getattr__(name: str):
    # Deferred (PEP 562): the `kernels` command builds the serve options (command.py) for every subcommand, and
    # only serving should pay for the HTTP server and git store (~60 ms of imports).
    if name in ("RegistryServer", "serve"):
        from . import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
