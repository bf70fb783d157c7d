"""Talos-specific pure functions: Image Factory schematics and URLs, per-node machine configuration patches."""
