"""Importers that generate catalog files from other catalogs (today: SkyPilot ``vms.csv``)."""
