"""InitProducerId for idempotent producers (KIP-98, KIP-360).

A producer without a transactional id gets a fresh producer id with epoch 0
each time it asks, including when it asks again after a fatal sequence error
(KIP-360's epoch bump for idempotent producers falls back to a new id): a new
id never collides with the old one's sequence state. Transactions are not
supported yet, so a transactional id is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wire.errors import ErrorCode
from wire.messages.init_producer_id_request import InitProducerIdRequest
from wire.messages.init_producer_id_response import InitProducerIdResponse
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker


async def handle_init_producer_id(
    broker: Broker, header: RequestHeader, request: InitProducerIdRequest, version: int
) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(
            error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1
        )
    return InitProducerIdResponse(
        error_code=ErrorCode.NONE, producer_id=broker.producer_ids.next_id(), producer_epoch=0
    )
