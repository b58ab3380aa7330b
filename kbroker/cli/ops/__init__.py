"""Operations tooling: the admin requests and output formatting behind ``kbroker topics``,
``console-producer``, ``console-consumer``, ``cluster describe`` and ``health``."""
