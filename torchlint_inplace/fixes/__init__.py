"""Autofix: `builders` turns the analysis' mutation events into fixes, `apply` applies them."""
