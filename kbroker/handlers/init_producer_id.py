"""InitProducerId (KIP-98, KIP-360).

Producer ids come from blocks unique in the cluster (kbroker/producer_ids.py); while this
broker has none (the metadata backend cannot give one now) the answer is
COORDINATOR_LOAD_IN_PROGRESS, which clients retry, as Kafka answers.

A producer without a transactional id (idempotent only) gets a fresh producer id with epoch 0
each time it asks, including when it asks again after a fatal sequence error (KIP-360's epoch
bump for idempotent producers falls back to a new id): a new id never collides with the old
one's sequence state.

A transactional id goes to the transaction coordinator (kbroker/txn/): it bumps the id's epoch,
fencing the previous producer and aborting its open transaction; v3+ may name the producer id
and epoch the producer had (KIP-360).

Authorization (kbroker/authorization.py), as Kafka's: a transactional id needs WRITE on it
(else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (KIP-679; else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbroker.authorization import authorize, authorize_any
from kbroker.handlers.transactions import FIRST_FENCED_INIT_VERSION, fenced_for
from kbroker.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from wire.errors import ErrorCode, KafkaError
from wire.messages.init_producer_id_request import InitProducerIdRequest
from wire.messages.init_producer_id_response import InitProducerIdResponse
from wire.messages.request_header import RequestHeader

if TYPE_CHECKING:
    from kbroker.broker import Broker


def _refused(error: ErrorCode) -> InitProducerIdResponse:
    """No producer id, no epoch, as Kafka answers a refusal."""
    return InitProducerIdResponse(error_code=error, producer_id=-1, producer_epoch=-1)


async def handle_init_producer_id(
    broker: Broker, header: RequestHeader, request: InitProducerIdRequest, version: int
) -> InitProducerIdResponse:
    if request.transactional_id is None:
        if not (
            authorize(broker, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
            or authorize_any(broker, AclOperation.WRITE, ResourceType.TOPIC)
        ):
            return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        try:
            await broker.producer_ids.ensure_available()
        except KafkaError as e:
            return _refused(e.code)
        return InitProducerIdResponse(
            error_code=ErrorCode.NONE, producer_id=broker.producer_ids.next_id(), producer_epoch=0
        )
    if not authorize(
        broker, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id
    ):
        return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    try:
        # The coordinator's core may give the transactional id a new producer id.
        await broker.producer_ids.ensure_available()
    except KafkaError as e:
        return _refused(e.code)
    result = await broker.txn_coordinator.init_producer_id(
        request.transactional_id,
        request.transaction_timeout_ms,
        request.producer_id,
        request.producer_epoch,
    )
    return InitProducerIdResponse(
        error_code=fenced_for(result.error, version, FIRST_FENCED_INIT_VERSION),
        producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    )
