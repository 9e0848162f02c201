"""``nki_dsl.isa`` (``nisa``): engine instructions, each running on the engine it names."""
