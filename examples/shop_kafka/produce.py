"""Send the sample events (events.json), and one record that is not JSON, to topic `events`.

The broker is $KAFKA_BOOTSTRAP, default 127.0.0.1:19092 (`deltaflow kafka start`). Run it with the Python
deltaflow is installed in (it uses confluent-kafka): `.venv/bin/python produce.py` in a checkout.
"""

import json
import os
from pathlib import Path

from confluent_kafka import Producer

producer = Producer({"bootstrap.servers": os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")})
for line in (Path(__file__).parent / "events.json").read_text().splitlines():
    producer.produce("events", key=json.loads(line)["event_id"], value=line)
producer.produce("events", value="not json at all")
producer.flush()
