"""The registry's errors, typed inside and turned into Confluent's JSON error bodies once, by the
HTTP shell: ``{"error_code": 40401, "message": "Subject 'x' not found."}`` with the HTTP status
Confluent's Schema Registry answers (the first three digits of the error code, or the code
itself for 409 and the bare statuses)."""

from __future__ import annotations


class RegistryError(Exception):
    """An answer other than success: HTTP ``status``, Confluent ``error_code``, ``message``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(subject: str, version: object) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(detail: str = "Schema not found") -> RegistryError:
    return RegistryError(404, 40403, detail)


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404,
        40404,
        f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
    )


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(
        404,
        40405,
        f"Subject '{subject}' was not deleted first before being permanently deleted",
    )


def version_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40406,
        f"Subject '{subject}' Version {version} was soft deleted.Set permanent=true to delete "
        "permanently",
    )


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(
        404,
        40407,
        f"Subject '{subject}' Version {version} was not deleted first before being permanently "
        "deleted",
    )


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured"
    )


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(
        404, 40409, f"Subject '{subject}' does not have subject-level mode configured"
    )


def invalid_schema(detail: str) -> RegistryError:
    return RegistryError(422, 42201, f"Invalid schema {detail}")


def invalid_version(version: object) -> RegistryError:
    return RegistryError(
        422,
        42202,
        f"The specified version '{version}' is not a valid version id. Allowed values are between "
        '[1, 2^31-1] and the string "latest"',
    )


def invalid_compatibility_level(level: object) -> RegistryError:
    return RegistryError(
        422,
        42203,
        f"Invalid compatibility level. Valid values are none, backward, forward, full, "
        f"backward_transitive, forward_transitive, and full_transitive (got {level!r})",
    )


def invalid_mode(mode: object) -> RegistryError:
    return RegistryError(
        422,
        42204,
        f"Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT "
        f"(got {mode!r})",
    )


def operation_not_permitted(detail: str) -> RegistryError:
    return RegistryError(422, 42205, detail)


def reference_exists(detail: str) -> RegistryError:
    return RegistryError(422, 42206, detail)


def incompatible(messages: list[str]) -> RegistryError:
    detail = "; ".join(messages) if messages else "the schema is not compatible"
    return RegistryError(
        409,
        409,
        "Schema being registered is incompatible with an earlier schema for subject; details: "
        + detail,
    )


def unprocessable(detail: str) -> RegistryError:
    """A request body that is not what the endpoint takes (Confluent answers 422 too)."""
    return RegistryError(422, 422, detail)


def store_error(detail: str) -> RegistryError:
    return RegistryError(500, 50001, f"Error while storing the schema: {detail}")


def operation_timeout(detail: str) -> RegistryError:
    return RegistryError(500, 50002, detail)


def forwarding_error(detail: str) -> RegistryError:
    return RegistryError(500, 50003, f"Error while forwarding the request to the leader: {detail}")


def unauthorized() -> RegistryError:
    return RegistryError(401, 401, "Unauthorized")


def forbidden(operation: str, resource: str) -> RegistryError:
    return RegistryError(403, 40301, f"User is denied operation {operation} on {resource}")


def not_found(path: str) -> RegistryError:
    return RegistryError(404, 404, f"HTTP 404 Not Found: {path}")


def method_not_allowed() -> RegistryError:
    return RegistryError(405, 405, "HTTP 405 Method Not Allowed")
