"""Leader/follower replication: ISR and high-watermark logic (``isr``, pure), follower
truncation points (``epochs``, pure), the follower fetchers (``fetcher``), the replicas a
broker hosts and their roles (``manager``), and high-watermark checkpoints (``checkpoints``).
"""
