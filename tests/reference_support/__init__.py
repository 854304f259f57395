"""Shared helpers for the reference's tests (imported explicitly: pytest runs with importlib mode)."""
