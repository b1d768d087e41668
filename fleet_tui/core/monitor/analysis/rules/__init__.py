"""The diagnosis rules: one function per kind, ``(WindowStats) -> Finding | None``.

Each is listed once in ``analysis.registry.RULES`` with its kind's priority, severity and action.
"""
