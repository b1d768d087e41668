"""fleet-tui: see what GPU/accelerator fleets do, size workloads, and pick cheaper instances.

Importing this package imports nothing heavy; the engine lives in ``fleet_tui.core``.
"""

__version__ = "0.1.0"
