"""hub_client: sharing NKI kernels through a Hugging Face Hub (or a self-hosted registry that speaks its API).

The public entry points are the ``kernels`` facade (``kernels.get_kernel``) and the ``kernels`` command line
(``hub_client.cli``). Modules, one job each:

- ``package``: reads a kernel package's ``kernel.toml``.
- ``bundle``: turns a package into a deterministic bundle (source, verified IR, test vectors, manifest).
- ``manifest``: the bundle manifest, its schema and path checks.
- ``publish``: one commit on branch ``v<major>``, tagged ``v<major>.<minor>.<patch>`` (``resume``: tag a commit
  a stopped publish left).
- ``resolve``: version or revision to a commit, online from the Hub's refs, offline from the recorded refs.
- ``fetch``: downloads into the standard HF cache and checks every digest before a byte is used.
- ``releases``: trust on first use: the first fetch of a release records (tag, commit, manifest digest); a release
  later found rewritten is refused.
- ``hub_errors``: huggingface_hub's HTTP and connection failures, turned into ``KernelHubError`` subclasses.
- ``loader`` / ``entry``: turns a verified snapshot into a loaded kernel (IR only, or trusted Python).
- ``lockfile``: ``kernels.lock``; ``cli``: the ``kernels`` command; ``server``: the self-hosted registry.
"""
