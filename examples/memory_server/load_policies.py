"""The application preloads its organisation's policies into the server's store.

Run once (and again whenever the policies change), against a running server:

    python examples/memory_server/load_policies.py --url http://127.0.0.1:2024

It calls the store API as the application (`acme-admin-token`, the one caller `auth.py` lets
write an organisation's namespace): `client.store.put_item((org_id,), "/compliance.md",
create_file_data(...))`, the chapter's code. Every user of `acme` then finds the file at
`/policies/compliance.md`, in their agent's prompt, read-only.
"""

import argparse
import asyncio

from langgraph_sdk import get_client

from fathom import create_file_data

ORG_ID = "acme"
ADMIN_TOKEN = "acme-admin-token"  # the example's fixed token (auth.py)
COMPLIANCE = (
    "## Compliance policies\n"
    "- Never disclose internal pricing\n"
    "- Always include disclaimers on financial advice\n"
)


async def preload(url: str, org_id: str = ORG_ID) -> None:
    """Put the organisation's compliance policy into the store at `(org_id,)`."""
    client = get_client(url=url, api_key=None, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    try:
        await client.store.put_item((org_id,), "/compliance.md", create_file_data(COMPLIANCE))
    finally:
        await client.http.client.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Preload the organisation's policies.")
    parser.add_argument("--url", default="http://127.0.0.1:2024")
    asyncio.run(preload(parser.parse_args().url))
