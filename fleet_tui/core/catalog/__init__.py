"""The catalog: accelerators, model architectures and cloud instance offers loaded from TOML.

One package, one concern per module:

* :mod:`.models`: :class:`Instance` (one offer) and :class:`Catalog` (everything loaded, look-ups);
* :mod:`.validation`: checking one file, every problem as ``file:line: field: message``;
* :mod:`.loading`: which files in which order, merging, :func:`load_catalog`, :func:`validate_paths`;
* :mod:`.compiled`: the loaded catalog cached in the user cache dir, offers built lazily;
* :mod:`.clouds`: the clouds registry (one record per cloud: names, import quirks, reserved discount);
* :mod:`.query`: filtering and sorting offers on typed values, the cheapest setup for N devices;
* :mod:`.importers`: generating ``catalogs/instances/<cloud>.toml`` from SkyPilot ``vms.csv`` files.
"""

from fleet_tui.core.catalog.loading import (
    SKIPPED_FILES,
    build_catalog,
    catalog_dirs,
    catalog_files,
    clear_cache,
    load_catalog,
    validate_paths,
)
from fleet_tui.core.catalog.models import PRICING_OPTIONS, Catalog, Instance, Pricing

__all__ = ["PRICING_OPTIONS", "SKIPPED_FILES", "Catalog", "Instance", "Pricing", "build_catalog", "catalog_dirs",
           "catalog_files", "clear_cache", "load_catalog", "validate_paths"]
