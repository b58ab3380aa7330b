"""The web console (``kbroker console``): a separate process that shows a Kafka-compatible
cluster in a browser, read-only unless started with ``--allow-writes``.

Pure cores: ``samples`` (the time series the charts draw, kept in memory with a clock passed
in), ``prometheus`` (reading a broker's metrics text), ``record_view`` (record bytes shown as
text, JSON, hex or decoded through a schema), ``auth`` (HTTP basic authentication and CSRF
tokens). Thin shells: ``sampler`` (the loop that reads the cluster into the samples),
``schemas`` (a schema registry client), ``pages`` and ``actions`` (aiohttp handlers over
kbroker.cli.ops), ``app`` (the aiohttp application and its middlewares).
"""
