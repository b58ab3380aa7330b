"""The Kafka protocol, sans-IO: bytes in, typed messages out (no sockets, asyncio or clock).

Modules: `errors` (error codes, exceptions), `primitives` (Reader/Writer), `messages`
(generated classes, one module per spec), `api_keys` (API keys, header versions), `frame`
(framing and request/response envelopes), `codegen` (the generator), `records` (record batches).
"""
