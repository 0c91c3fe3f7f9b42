"""Interoperability with other tools: serving-simulator profile bundles (Vidur)."""
