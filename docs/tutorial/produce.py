"""Send the starter's sample events, and one record that is not JSON, to topic `events`."""

import json
import os
from pathlib import Path

from confluent_kafka import Producer

producer = Producer({"bootstrap.servers": os.environ.get("KAFKA_BOOTSTRAP", "127.0.0.1:19092")})
for line in Path("landing/events-0001.json").read_text().splitlines():
    producer.produce("events", key=json.loads(line)["event_id"], value=line)
producer.produce("events", value="not json at all")
producer.flush()
