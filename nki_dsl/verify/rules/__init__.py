"""The list of verifier rules. Each rule is ``fn(kernel, target) -> list[Diagnostic]`` in its own module."""

RULES = []
