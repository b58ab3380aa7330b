"""The protocol side of kbroker's Kafka clients, sans-IO (DESIGN.md: pure cores, thin shells).

``connection`` is one connection's state machine (framing, correlation ids, ApiVersions
negotiation, SASL), ``sasl`` the SASL mechanisms, ``metadata`` the cache of brokers, leaders
and coordinators, ``requests`` the requests the shells build and how their answers read,
``fetched`` a consumer's decoding of fetched records, ``security`` Kafka's client security
properties, ``partitioner`` Kafka's default partitioner. The asyncio shell is
kbroker.client, the blocking one kbroker.data_client; both only move bytes, wrap TLS and
keep time.
"""
