import pytest

from kbroker.security.principal_rules import map_principal, parse_rules

DN = "CN=alice,OU=ServiceUsers,O=Example,C=US"


def test_default_keeps_the_dn() -> None:
    assert map_principal(parse_rules("DEFAULT"), DN) == DN


def test_first_matching_rule_wins_with_case() -> None:
    rules = parse_rules(
        "RULE:^CN=(.*?),OU=Admins.*$/admin-$1/, RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U,DEFAULT"
    )
    assert map_principal(rules, DN) == "ALICE"
    assert map_principal(rules, "CN=bob,OU=Admins,O=X") == "admin-bob"
    assert map_principal(rules, "CN=carol,O=X") == "CN=carol,O=X"


def test_escaped_slash_and_no_match() -> None:
    rules = parse_rules(r"RULE:^CN=([^,]*)\/x.*$/$1/L")
    assert map_principal(rules, "CN=Dave/x,O=Y") == "dave"
    with pytest.raises(ValueError, match="No ssl.principal.mapping.rules"):
        map_principal(rules, DN)


@pytest.mark.parametrize("bad", ["RULE:^CN=(.*)$/$1", "NOPE", "DEFAULT junk"])
def test_invalid_rules(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_rules(bad)


def test_dn_of_subject_is_rfc2253_order() -> None:
    from kbroker.security.principal_rules import dn_of_subject

    subject = (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc"),),
        (("organizationalUnitName", "ServiceUsers"),),
        (("commonName", "alice"),),
    )
    assert dn_of_subject(subject) == "CN=alice,OU=ServiceUsers,O=Example\\, Inc,C=US"
