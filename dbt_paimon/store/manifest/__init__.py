"""Manifests: `DataFileMeta`, `ManifestEntry`, manifest files and manifest lists, and the column
statistics they hold (`SimpleStats`)."""
