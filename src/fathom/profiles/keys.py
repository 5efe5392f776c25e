"""Profile registry keys: `provider` (every model of a provider) or `provider:model` (one model).

Only the first colon separates; the model part may hold more colons
(`ollama:glm-5.2:cloud`, Bedrock ARNs with `::`).
"""

from __future__ import annotations

__all__ = ["candidate_keys", "validate_key"]


def validate_key(key: str) -> None:
    """Raise `ValueError` unless `key` is `provider` or `provider:model` without stray spaces.

    A key with surrounding whitespace, whitespace next to the first colon, or an empty half
    could never match a model, so a registration under it would silently do nothing.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"A profile key must be a non-empty string, not {key!r}.")
    if key != key.strip():
        raise ValueError(
            f"Profile key {key!r} has leading or trailing whitespace; write it as "
            "'provider' or 'provider:model'."
        )
    provider, sep, model = key.partition(":")
    if not sep:
        return
    if not provider or not model:
        raise ValueError(
            f"Profile key {key!r} has an empty provider or model; write it as 'provider:model'."
        )
    if provider != provider.strip() or model != model.strip():
        raise ValueError(
            f"Profile key {key!r} has whitespace next to ':'; write 'provider:model' with no "
            "spaces around the first colon."
        )


def candidate_keys(spec: str) -> tuple[str | None, str | None]:
    """`(exact, provider)` registry keys for a model spec; `provider` is `None` without a colon.

    A bare spec is looked up as it is (it names a provider).
    """
    if not spec:
        return None, None
    provider, sep, model = spec.partition(":")
    if not sep:
        return spec, None
    if not provider or not model:
        return None, None
    return spec, provider
