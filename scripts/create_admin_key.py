"""Create the first admin API key, straight into the API keys table (the one key the API cannot make).

    python scripts/create_admin_key.py --table <ApiKeysTableName from the stack outputs>

Prints the token once; it is stored only as a hash.
"""

from __future__ import annotations

import argparse

from hookrelay.adapters import aws
from hookrelay.adapters.dynamodb import ApiKeyTable
from hookrelay.domain.api_keys import ADMIN
from hookrelay.services.api_keys import IssuedKey, KeyService


def create_admin_key(table_name: str, description: str = "bootstrap admin") -> IssuedKey:
    return KeyService(ApiKeyTable(aws.table(table_name))).issue(ADMIN, description)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", required=True, help="the API keys table (stack output ApiKeysTableName)")
    parser.add_argument("--description", default="bootstrap admin")
    args = parser.parse_args()
    issued = create_admin_key(args.table, args.description)
    print(f"key id: {issued.key.key_id}\ntoken:  {issued.token}\n(store it now: it cannot be shown again)")


if __name__ == "__main__":
    main()
