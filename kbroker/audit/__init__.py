"""The end-to-end audit (issue 27, item 4): per-window record counts of every partition,
published to the compacted topic ``__audit`` and compared across tiers by ``kbroker audit``."""
