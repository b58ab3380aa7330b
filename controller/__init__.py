"""Cluster metadata backends and the controller's decisions.

- ``interface``: the ``MetadataBackend`` protocol every backend implements (DESIGN rule 7).
- ``embedded``: the single-node backend (no ZooKeeper), used by ``make run``.
- ``zk_backend``: the ZooKeeper backend (the only kazoo import); ``zk_paths``: its znode
  layout and payloads; ``decisions``: the controller's pure decisions (placement, elections).

How the controller tells brokers their roles: no inter-broker controller requests
(LeaderAndIsr, UpdateMetadata, StopReplica, ControlledShutdown, AlterPartition are not used).
The partition state znodes are the channel: the controller writes leader, leader epoch and
ISR there (fenced by the controller epoch's znode version), every broker watches them and
takes its roles from what it reads, leaders change the ISR by conditional writes on the same
znodes, and a broker shutting down removes its registration so the controller moves its
leaderships. Brokers talk to each other only with client APIs: Fetch and
OffsetForLeaderEpoch with a replica id (replication/fetcher.py).
"""
