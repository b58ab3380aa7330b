"""The pure ACL authorizer (kbroker/security/acls.py): Kafka's AclAuthorizer semantics."""

from __future__ import annotations

import pytest

from kbroker.security.acls import (
    OPERATIONS_NOT_REQUESTED,
    AclBinding,
    AclBindingFilter,
    AclIndex,
    AclOperation,
    Authorizer,
    PatternType,
    PermissionType,
    ResourceType,
    all_operations,
    parse_name,
    parse_super_users,
    pascal_name,
)

Op = AclOperation
T = ResourceType
ALLOW = PermissionType.ALLOW
DENY = PermissionType.DENY
LIT = PatternType.LITERAL
PRE = PatternType.PREFIXED
ALICE = "User:alice"
HOST = "10.0.0.1"


def acl(
    name: str = "t",
    op: AclOperation = Op.READ,
    perm: PermissionType = ALLOW,
    *,
    kind: ResourceType = T.TOPIC,
    pattern: PatternType = LIT,
    principal: str = ALICE,
    host: str = "*",
) -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, op, perm)


def authorizer(*acls: AclBinding, **kwargs: object) -> Authorizer:
    table = frozenset(acls)
    return Authorizer(lambda: table, **kwargs)  # type: ignore[arg-type]


def allowed(auth: Authorizer, op: AclOperation, name: str = "t", **kw: object) -> bool:
    principal = str(kw.get("principal", ALICE))
    host = str(kw.get("host", HOST))
    kind = kw.get("kind", T.TOPIC)
    assert isinstance(kind, ResourceType)
    return auth.authorize(principal, host, op, kind, name)


def test_codes_are_kafkas() -> None:
    assert [int(t) for t in (T.TOPIC, T.GROUP, T.CLUSTER, T.TRANSACTIONAL_ID)] == [2, 3, 4, 5]
    assert (T.DELEGATION_TOKEN, T.USER) == (6, 7)
    assert (PatternType.ANY, PatternType.MATCH, LIT, PRE) == (1, 2, 3, 4)
    assert (Op.ANY, Op.ALL, Op.READ, Op.DESCRIBE, Op.IDEMPOTENT_WRITE, Op.DESCRIBE_TOKENS) == (
        1, 2, 3, 8, 12, 14,
    )  # fmt: skip
    assert (PermissionType.ANY, DENY, ALLOW) == (1, 2, 3)


def test_names_round_trip_in_pascal_case_and_upper_case() -> None:
    assert pascal_name(Op.DESCRIBE_CONFIGS) == "DescribeConfigs"
    assert pascal_name(T.TRANSACTIONAL_ID) == "TransactionalId"
    assert parse_name(Op, "DescribeConfigs") is Op.DESCRIBE_CONFIGS
    assert parse_name(Op, "DESCRIBE_CONFIGS") is Op.DESCRIBE_CONFIGS
    assert parse_name(PermissionType, "Allow") is ALLOW
    assert parse_name(Op, "Fly") is Op.UNKNOWN


def test_no_acl_denies_unless_allow_everyone() -> None:
    assert not allowed(authorizer(), Op.READ)
    assert allowed(authorizer(allow_if_no_acl=True), Op.READ)
    # An ACL for someone else on the resource: no longer "no ACL found".
    other = acl(principal="User:bob")
    assert not allowed(authorizer(other, allow_if_no_acl=True), Op.READ)


def test_literal_allow_for_principal_only() -> None:
    auth = authorizer(acl())
    assert allowed(auth, Op.READ)
    assert not allowed(auth, Op.READ, principal="User:bob")
    assert not allowed(auth, Op.WRITE)
    assert not allowed(auth, Op.READ, name="u")


def test_wildcards_principal_host_and_resource() -> None:
    auth = authorizer(acl("*", principal="User:*"))
    assert allowed(auth, Op.READ, name="anything", principal="User:bob")
    host_bound = authorizer(acl(host="10.0.0.2"))
    assert not allowed(host_bound, Op.READ)
    assert allowed(host_bound, Op.READ, host="10.0.0.2")


def test_prefixed_patterns_match_names_starting_with_them() -> None:
    auth = authorizer(acl("fin", pattern=PRE), acl("finance-", Op.WRITE, pattern=PRE))
    assert allowed(auth, Op.READ, name="finance-eu")
    assert allowed(auth, Op.WRITE, name="finance-eu")
    assert not allowed(auth, Op.WRITE, name="fin")
    assert allowed(auth, Op.READ, name="fin")
    assert not allowed(auth, Op.READ, name="fi")
    assert not allowed(auth, Op.READ, name="fin", kind=T.GROUP)


def test_deny_wins_over_allow() -> None:
    auth = authorizer(acl("*", Op.ALL), acl("secret", Op.READ, DENY))
    assert allowed(auth, Op.READ, name="public")
    assert not allowed(auth, Op.READ, name="secret")
    assert allowed(auth, Op.WRITE, name="secret")
    everyone_denied = authorizer(acl(), acl(op=Op.ALL, perm=DENY, principal="User:*"))
    assert not allowed(everyone_denied, Op.READ)


def test_implied_operations_for_allow_only() -> None:
    for op in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        assert allowed(authorizer(acl(op=op)), Op.DESCRIBE)
    assert not allowed(authorizer(acl(op=Op.CREATE)), Op.DESCRIBE)
    assert allowed(authorizer(acl(op=Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not allowed(authorizer(acl(op=Op.DESCRIBE_CONFIGS)), Op.ALTER_CONFIGS)
    assert allowed(authorizer(acl(op=Op.ALL)), Op.IDEMPOTENT_WRITE, kind=T.TOPIC)
    # A DENY of READ does not deny DESCRIBE (which WRITE allows).
    auth = authorizer(acl(op=Op.READ, perm=DENY), acl(op=Op.WRITE))
    assert allowed(auth, Op.DESCRIBE)


def test_super_users() -> None:
    supers = parse_super_users("User:admin; User:ops ;")
    assert supers == {"User:admin", "User:ops"}
    auth = authorizer(acl(op=Op.ALL, perm=DENY, principal="User:*"), super_users=supers)
    assert allowed(auth, Op.ALTER, principal="User:admin")
    assert not allowed(auth, Op.READ)


def test_index_is_rebuilt_when_the_source_changes() -> None:
    table: list[frozenset[AclBinding]] = [frozenset()]
    auth = Authorizer(lambda: table[0])
    assert not allowed(auth, Op.READ)
    table[0] = frozenset({acl()})
    assert allowed(auth, Op.READ)


def test_index_matching_collects_literal_wildcard_and_prefixes() -> None:
    acls = [
        acl("t"),
        acl("*"),
        acl("t", pattern=PRE),
        acl("to", pattern=PRE),
        acl("x", pattern=PRE),
    ]
    index = AclIndex(acls)
    assert sorted(index.matching(T.TOPIC, "top"), key=repr) == sorted(
        [acls[1], acls[2], acls[3]], key=repr
    )
    assert index.matching(T.GROUP, "t") == []


def test_authorized_operations_bitfield() -> None:
    auth = authorizer(acl(op=Op.READ))
    assert auth.authorized_operations(ALICE, HOST, T.TOPIC, "t") == (1 << 3) | (1 << 8)
    assert auth.authorized_operations(ALICE, HOST, T.TOPIC, "u") == 0
    assert all_operations(T.GROUP) == sum(1 << op for op in (3, 6, 8))
    assert OPERATIONS_NOT_REQUESTED == -2147483648


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (AclBindingFilter(), {"lit-t", "lit-*", "pre-t", "pre-to", "group-t"}),
        (AclBindingFilter(T.TOPIC, "t", PatternType.ANY), {"lit-t", "pre-t"}),
        (AclBindingFilter(T.TOPIC, "t", LIT), {"lit-t"}),
        (AclBindingFilter(T.TOPIC, "t", PRE), {"pre-t"}),
        (AclBindingFilter(T.TOPIC, "top", PatternType.MATCH), {"lit-*", "pre-t", "pre-to"}),
        (AclBindingFilter(T.TOPIC, None, PatternType.MATCH), {"lit-t", "lit-*", "pre-t", "pre-to"}),
        (AclBindingFilter(T.ANY, "t", PatternType.MATCH), {"lit-t", "lit-*", "pre-t", "group-t"}),
        (AclBindingFilter(operation=Op.WRITE), {"pre-to"}),
        (AclBindingFilter(permission=DENY), {"lit-*"}),
        (AclBindingFilter(principal="User:bob"), {"group-t"}),
        (AclBindingFilter(host="10.0.0.9"), {"pre-t"}),
    ],
)
def test_filters(flt: AclBindingFilter, expected: set[str]) -> None:
    named = {
        "lit-t": acl("t"),
        "lit-*": acl("*", perm=DENY),
        "pre-t": acl("t", pattern=PRE, host="10.0.0.9"),
        "pre-to": acl("to", Op.WRITE, pattern=PRE),
        "group-t": acl("t", kind=T.GROUP, principal="User:bob"),
    }
    assert {name for name, b in named.items() if flt.matches(b)} == expected


def test_binding_validation() -> None:
    assert acl().problem() is None
    assert acl(kind=T.ANY).problem() == "Invalid resourceType ANY"
    assert acl(pattern=PatternType.MATCH).problem() == "Invalid patternType MATCH"
    assert acl(op=Op.ANY).problem() == "Invalid operation ANY"
    assert acl(perm=PermissionType.ANY).problem() == "Invalid permissionType ANY"
    assert acl("").problem() == "Invalid empty resource name"
    assert "CLUSTER" in (acl("c", kind=T.CLUSTER).problem() or "")
    assert acl("kafka-cluster", kind=T.CLUSTER).problem() is None
    assert "principal" in (acl(principal="alice").problem() or "")
    assert AclBindingFilter(operation=Op.UNKNOWN).problem() == "Unknown entryFilter."
    assert AclBindingFilter(pattern_type=PatternType.UNKNOWN).problem() == "Unknown patternFilter."
    assert AclBindingFilter().problem() is None


def test_authorize_any_resource_of_a_type() -> None:
    def any_write(auth: Authorizer, principal: str = ALICE) -> bool:
        return auth.authorize_any(principal, HOST, Op.WRITE, T.TOPIC)

    assert not any_write(authorizer())
    assert any_write(authorizer(allow_if_no_acl=True))
    assert any_write(authorizer(acl("t", Op.WRITE)))
    assert any_write(authorizer(acl("t", Op.ALL)))
    assert not any_write(authorizer(acl("t", Op.READ)))
    assert not any_write(authorizer(acl("t", Op.WRITE)), "User:bob")
    assert not any_write(authorizer(acl("t", Op.WRITE), acl("*", Op.WRITE, DENY)))
    assert not any_write(authorizer(acl("t1", Op.WRITE), acl("t", Op.WRITE, DENY, pattern=PRE)))
    assert any_write(authorizer(acl("t1", Op.WRITE), acl("u", Op.WRITE, DENY, pattern=PRE)))
    assert any_write(authorizer(super_users={ALICE}))
