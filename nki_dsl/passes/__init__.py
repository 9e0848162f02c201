"""Passes over kernel IR: rules as data applied by one rewrite engine, run as a flat named pipeline."""
