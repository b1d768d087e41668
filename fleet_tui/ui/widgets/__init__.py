"""Reusable widgets of the fleet-tui app."""
