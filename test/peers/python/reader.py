"""A change feed reader on azure-cosmos (Python has no change feed processor).

Reads a container's change feed per feed range, from the beginning on its first run and from
the continuations it saved on later ones, until every range is caught up, then saves the
continuations and exits. Each change is printed to stdout as one JSON line:
{"id", "pk", "lsn", "range"} (range: the index of the feed range it was read from).

    COSMOS_KEY=... python reader.py --endpoint URL --database DB --container C --state FILE

TLS trust comes from REQUESTS_CA_BUNDLE (the emulator's certificate): verification stays on.
The key is read from COSMOS_KEY and never printed.
"""

import argparse
import json
import os
import sys

from azure.cosmos import CosmosClient


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--endpoint", required=True)
    p.add_argument("--database", required=True)
    p.add_argument("--container", required=True)
    p.add_argument("--state", required=True, help="file of the saved continuations")
    args = p.parse_args()

    client = CosmosClient(args.endpoint, credential=os.environ["COSMOS_KEY"])
    container = client.get_database_client(args.database).get_container_client(args.container)

    if os.path.exists(args.state):
        with open(args.state) as f:
            state = json.load(f)
    else:
        state = {"ranges": [{"feed_range": fr, "continuation": None} for fr in container.read_feed_ranges()]}

    for i, r in enumerate(state["ranges"]):
        if r["continuation"] is None:
            it = container.query_items_change_feed(feed_range=r["feed_range"], start_time="Beginning")
        else:
            it = container.query_items_change_feed(continuation=r["continuation"])
        for page in it.by_page():
            for doc in page:
                print(json.dumps({"id": doc["id"], "pk": doc.get("pk"), "lsn": doc["_lsn"], "range": i}), flush=True)
        # The composite continuation of the range (its children after a split) is the etag
        # of the last response.
        r["continuation"] = container.client_connection.last_response_headers["etag"]
        tmp = args.state + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.replace(tmp, args.state)
    print(f"read {len(state['ranges'])} feed ranges", file=sys.stderr)


if __name__ == "__main__":
    main()
