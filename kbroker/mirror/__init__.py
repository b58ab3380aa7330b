"""Mirror topics: topics that follow a topic of another Kafka-compatible cluster."""
