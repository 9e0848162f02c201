"""Numbered, runnable lessons. ``python -m tutorials`` runs them all in order."""
